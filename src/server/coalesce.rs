//! Wake-up coalescing for the one-thread runtime (`io-threads 1`): a short timed nap before the
//! runtime parks, while it measurably raises throughput (`wakeup-coalescing-us`, ours; off by
//! default: it won on the development VM, whose halted CPUs wake slowly, but not on a second
//! machine with guest halt-polling, so it is opt-in).
//!
//! A client whose request reaches a sleeping server pays for waking it: the write that delivers
//! the request also runs the scheduler's wake-up of the server's thread on the other CPU, an
//! inter-processor interrupt. On a virtual machine without guest halt-polling (the 2-core
//! development VM boots with `haltpoll.guest_halt_poll_ns=0`) that is expensive: with
//! `redis-benchmark -c 50 -P 1`, whose one thread saturates its CPU, each wake-up cost the client
//! about 14 µs of its own CPU (1.2 µs per GET at 0.08 server sleeps per request), so the server's
//! speed did not show in the client's throughput, and Redis, busier per request and so asleep
//! less often, kept pace.
//!
//! While napping (a timed sleep) the server has no waiter on its sockets: a client's write just
//! queues its request, and the runtime parks after the nap to find several ready. That cuts the
//! wake-ups the clients pay for, at the price of up to the nap's length of added latency for a
//! request arriving during it. It pays only when enough other connections keep the clients busy
//! meanwhile (measured, 30 µs naps against no naps: 0.64x throughput at 8 connections, 0.85x at
//! 16, 1.04x at 24, 1.18-1.21x at 32 to 100), so whether it pays is measured, not guessed. While
//! the server is busy at least `MIN_UTIL_PCT` of the time (below that naps stop at once), a
//! trial runs an epoch without naps, one with, and one without again, and compares the request
//! bytes read per second (`NET_INPUT_BYTES`): naps are kept when the epoch with them is
//! `GAIN_PCT` ahead of both epochs without (two, so that a load that happens to rise during the
//! trial is not taken for a gain). The verdict holds for a number of epochs that doubles each time a trial confirms it,
//! so a trial costs little once the load is steady (at most one epoch in `HOLD_MAX`, 1 s, goes
//! the other way), and a change of load is followed within a second.

use std::cell::RefCell;
use std::sync::atomic::Ordering;

use crate::config::live;

/// One measurement epoch.
const EPOCH_US: u64 = 25_000;
/// Below this share of busy time naps stop and no trial runs (the server keeps up; naps would
/// only add latency).
/// Busy time is measured between unpark and park, which leaves out the syscalls at either end:
/// a server at 33% of a CPU by its own clock measures about 25% here.
const MIN_UTIL_PCT: u64 = 10;
/// How much more throughput naps must bring to be kept.
const GAIN_PCT: u64 = 5;
/// Epochs a choice is held at first, and at most.
const HOLD_MIN: u32 = 8;
const HOLD_MAX: u32 = 40;

#[derive(Clone, Copy, PartialEq, Debug)]
enum Phase {
    /// Napping or not for this many more epochs.
    Hold { napping: bool, epochs_left: u32 },
    /// The trial's first epoch, without naps.
    Without,
    /// The trial's epoch with naps; the rate the epoch before reached.
    With { rate_without: u64 },
    /// The trial's last epoch, without naps again; the rates of the two before.
    WithoutAgain { rate_without: u64, rate_with: u64 },
}

/// The controller: state of the runtime thread, updated at each park and unpark.
#[derive(Debug)]
struct Coalescer {
    phase: Phase,
    /// The last trial's verdict and how long it is held.
    napping: bool,
    hold: u32,
    /// The last park or unpark, and the time spent running since the epoch began.
    last_us: u64,
    busy_us: u64,
    epoch_start_us: u64,
    epoch_start_bytes: u64,
}

impl Coalescer {
    const fn new() -> Coalescer {
        Coalescer {
            phase: Phase::Hold { napping: false, epochs_left: HOLD_MIN },
            napping: false,
            hold: HOLD_MIN,
            last_us: 0,
            busy_us: 0,
            epoch_start_us: 0,
            epoch_start_bytes: 0,
        }
    }

    /// Ends the epoch that ran until `now_us` having read `bytes` in all: the next phase. An
    /// epoch lasts from one park to the first park at least `EPOCH_US` later, so an idle server's
    /// epochs are long; holds count the epochs' worth of time that passed.
    fn end_epoch(&mut self, now_us: u64, bytes: u64) {
        let elapsed = now_us.saturating_sub(self.epoch_start_us).max(1);
        let rate = bytes.saturating_sub(self.epoch_start_bytes) * 1_000_000 / elapsed;
        let epochs = u32::try_from(elapsed / EPOCH_US).unwrap_or(u32::MAX).max(1);
        // A server that keeps up easily gains nothing from naps: they stop, and no trial runs.
        let busy_enough = self.busy_us * 100 >= elapsed * MIN_UTIL_PCT;
        self.phase = match self.phase {
            _ if !busy_enough => {
                self.napping = false;
                self.hold = HOLD_MIN;
                Phase::Hold { napping: false, epochs_left: HOLD_MIN }
            }
            Phase::Hold { napping, epochs_left } if epochs_left > epochs => {
                Phase::Hold { napping, epochs_left: epochs_left - epochs }
            }
            Phase::Hold { .. } => Phase::Without,
            Phase::Without => Phase::With { rate_without: rate },
            Phase::With { rate_without } => Phase::WithoutAgain { rate_without, rate_with: rate },
            Phase::WithoutAgain { rate_without, rate_with } => {
                let napping = rate_with * 100 > rate_without.max(rate) * (100 + GAIN_PCT);
                self.hold = if napping == self.napping { (self.hold * 2).min(HOLD_MAX) } else { HOLD_MIN };
                self.napping = napping;
                Phase::Hold { napping, epochs_left: self.hold }
            }
        };
        self.busy_us = 0;
        self.epoch_start_us = now_us;
        self.epoch_start_bytes = bytes;
    }

    /// Whether the current phase naps.
    fn naps(&self) -> bool {
        match self.phase {
            Phase::Hold { napping, .. } => napping,
            Phase::Without | Phase::WithoutAgain { .. } => false,
            Phase::With { .. } => true,
        }
    }
}

thread_local! {
    static STATE: RefCell<Coalescer> = const { RefCell::new(Coalescer::new()) };
}

/// Called on the runtime thread before it starts: naps need a timer slack below their length
/// (the default 50 µs would stretch a 25 µs nap to 75).
pub fn init_thread() {
    // SAFETY: prctl with PR_SET_TIMERSLACK takes an integer and changes only this thread.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1000 as libc::c_ulong) };
}

/// The runtime is about to park; `may_nap` is false when something was just made runnable
/// (replies released by an fsync), which a nap would delay.
pub fn before_park(may_nap: bool) {
    let nap_us = live::get_u64(&live::WAKEUP_COALESCING_US);
    if nap_us == 0 {
        return;
    }
    let now = crate::util::clock::mono_us();
    let nap = STATE.with_borrow_mut(|c| {
        c.busy_us += now.saturating_sub(c.last_us);
        c.last_us = now;
        if now.saturating_sub(c.epoch_start_us) >= EPOCH_US {
            c.end_epoch(now, crate::stats::NET_INPUT_BYTES.load(Ordering::Relaxed));
        }
        may_nap && c.naps()
    });
    if nap {
        // The directive's bound (1000 µs) keeps this under a second.
        let ts = libc::timespec { tv_sec: 0, tv_nsec: (nap_us * 1000) as libc::c_long };
        // SAFETY: a valid timespec; an interrupted nap just ends early.
        unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) };
    }
}

/// The runtime woke up: the time since the park (nap included) was idle.
pub fn after_unpark() {
    if live::get_u64(&live::WAKEUP_COALESCING_US) != 0 {
        STATE.with_borrow_mut(|c| c.last_us = crate::util::clock::mono_us());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `epochs` epochs at `rate` bytes per second and `util_pct` busy time.
    fn run(
        c: &mut Coalescer,
        now: &mut u64,
        bytes: &mut u64,
        epochs: u32,
        rate_with: u64,
        rate_without: u64,
        util_pct: u64,
    ) {
        for _ in 0..epochs {
            c.busy_us = EPOCH_US * util_pct / 100;
            *now += EPOCH_US;
            *bytes += if c.naps() { rate_with } else { rate_without } * EPOCH_US / 1_000_000;
            c.end_epoch(*now, *bytes);
        }
    }

    #[test]
    fn naps_only_while_they_raise_throughput() {
        let (mut now, mut bytes) = (0, 0);
        let mut c = Coalescer::new();
        // A server that keeps up never tries.
        for _ in 0..500 {
            run(&mut c, &mut now, &mut bytes, 1, 2_000_000, 1_000_000, MIN_UTIL_PCT / 2);
            assert!(!c.naps());
        }
        // Busy, and naps bring 20%: it naps, and holds that longer after each confirmation.
        run(&mut c, &mut now, &mut bytes, HOLD_MIN + 3, 1_200_000, 1_000_000, 80);
        assert!(c.napping && c.naps());
        let mut naps = 0;
        for _ in 0..2000 {
            run(&mut c, &mut now, &mut bytes, 1, 1_200_000, 1_000_000, 80);
            naps += c.naps() as u32;
        }
        assert_eq!(c.hold, HOLD_MAX);
        assert!(naps > 2000 - 2 * (2000 / HOLD_MAX + 8), "{naps}");
        // The load goes: naps stop with the first idle epoch, however long the hold.
        run(&mut c, &mut now, &mut bytes, 1, 0, 0, 0);
        assert!(!c.napping && !c.naps());
        run(&mut c, &mut now, &mut bytes, HOLD_MIN + 3, 1_200_000, 1_000_000, 80);
        assert!(c.naps());
        // Naps cost throughput: they stop at the next trial and are tried rarely after.
        run(&mut c, &mut now, &mut bytes, HOLD_MAX + 3, 800_000, 1_000_000, 80);
        assert!(!c.napping);
        let mut naps = 0;
        for _ in 0..2000 {
            run(&mut c, &mut now, &mut bytes, 1, 800_000, 1_000_000, 80);
            naps += c.naps() as u32;
        }
        assert!(naps < 2000 / HOLD_MAX + 8, "{naps}");
        // A load that rises during the trial is not taken for a gain.
        let mut c = Coalescer::new();
        let (mut rate, mut trials) = (1_000_000u64, 0);
        for _ in 0..40 {
            rate = rate * 108 / 100;
            run(&mut c, &mut now, &mut bytes, 1, rate, rate, 80);
            assert!(!c.napping, "{:?}", c.phase);
            trials += matches!(c.phase, Phase::WithoutAgain { .. }) as u32;
        }
        assert!(trials >= 2, "{trials}");
        // A gain under GAIN_PCT is not taken.
        run(&mut c, &mut now, &mut bytes, 400, 1_030_000, 1_000_000, 80);
        assert!(!c.napping);
    }
}
