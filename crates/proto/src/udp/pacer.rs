//! Smooth UDP pacing: a token bucket that says how many datagrams may go now.
//!
//! iperf3 paces by sleeping and then sending until the average since the stream began is back
//! on target, so after a late wake-up (or a descheduled thread) it sends a burst as long as the
//! delay: users see 100 ms line-rate bursts and the loss they cause (issues #386, #486, #609).
//! [`Pacer`] keeps the average exact but never bursts: a sender that fell behind catches up
//! at [`CATCH_UP_RATE`] times the rate at most, in steps of at most [`Pacer::burst_cap`]
//! datagrams (by default half the rate's worth of [`BURST_WINDOW`], at least 1), so no 1 ms
//! ever carries more than about twice its even share. Only a backlog beyond [`CATCH_UP_LIMIT`]
//! of sending time (a sender that cannot keep up at all, or a thread descheduled for that long)
//! is skipped, not sent later, and counted ([`Pacer::fell_behind`],
//! [`Pacer::skipped_datagrams`]) so reports can say the sender could not keep up instead of
//! silently sending less.
//!
//! Arithmetic is exact integer: by time `t` the stream is entitled to
//! `floor((t − start) × rate / datagram_bits) + 1` datagrams (the first may go at `start`), so
//! a sender that keeps up sends exactly the rate over any long run. The catch-up limit is a
//! second token bucket (GCRA) refilled at [`CATCH_UP_RATE`] times the rate. The rate counts
//! the datagram bytes the caller gives (UDP payload, as iperf3's `-b` does).
//!
//! iperf3's burst mode (`-b RATE/BURST`, [`Pacer::with_burst`]) is the one exception, asked
//! for by name: the entitlement then comes in whole bursts (the first at `start`, the next
//! when the rate has caught up with all of it), each sent at once.
//!
//! The pacer reads no clock and does not sleep: the driver passes `now` and waits until
//! [`Pacer::next_send_at`] itself.

use std::time::Duration;

/// The window whose share of the rate sets the default step (half of it, at least 1).
pub const BURST_WINDOW: Duration = Duration::from_millis(1);
/// A late sender catches up at most this many times faster than the rate.
pub const CATCH_UP_RATE: f64 = 1.5;
/// Backlog beyond this much sending time is skipped (and counted), not caught up.
pub const CATCH_UP_LIMIT: Duration = Duration::from_millis(50);

const NANOS_PER_SECOND: u128 = 1_000_000_000;

/// A token bucket for one UDP stream; see the module docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pacer {
    start: Duration,
    bits_per_second: u64,
    datagram_bits: u64,
    burst_cap: u64,
    /// Most datagrams owed before the excess is skipped.
    max_backlog: u64,
    /// Catch-up bucket: nanoseconds between datagrams at the catch-up rate.
    catch_up_interval_ns: u128,
    /// Catch-up bucket: theoretical time of the next datagram (GCRA), ns since `start`.
    catch_up_tat_ns: u128,
    /// Datagrams sent plus datagrams skipped: the part of the entitlement used up.
    used: u64,
    sent: u64,
    skipped: u64,
    fell_behind: u64,
    /// Datagrams per burst (`-b RATE/BURST`); 1 = every datagram paced on its own.
    burst: u64,
}

fn duration_from_nanos(ns: u128) -> Duration {
    let secs = u64::try_from(ns / NANOS_PER_SECOND).unwrap_or(u64::MAX);
    Duration::new(secs, (ns % NANOS_PER_SECOND) as u32)
}

/// Datagrams of `datagram_bits` that `window` of `bits_per_second` carries, rounded down.
fn per_window(bits_per_second: u64, datagram_bits: u64, window: Duration) -> u64 {
    let n = u128::from(bits_per_second) * window.as_nanos()
        / (u128::from(datagram_bits) * NANOS_PER_SECOND);
    u64::try_from(n).unwrap_or(u64::MAX)
}

impl Pacer {
    /// A pacer for `bits_per_second` (0 = unlimited) of `datagram_bytes`-byte datagrams
    /// (0 is taken as 1), starting at `start` on the caller's monotonic clock.
    pub fn new(bits_per_second: u64, datagram_bytes: u32, start: Duration) -> Self {
        let datagram_bits = u64::from(datagram_bytes.max(1)) * 8;
        let burst_cap = (per_window(bits_per_second, datagram_bits, BURST_WINDOW) / 2).max(1);
        let interval_ns = if bits_per_second == 0 {
            0
        } else {
            u128::from(datagram_bits) * NANOS_PER_SECOND / u128::from(bits_per_second)
        };
        Self {
            start,
            bits_per_second,
            datagram_bits,
            burst_cap,
            max_backlog: per_window(bits_per_second, datagram_bits, CATCH_UP_LIMIT).max(burst_cap),
            catch_up_interval_ns: (interval_ns as f64 / CATCH_UP_RATE) as u128,
            catch_up_tat_ns: 0,
            used: 0,
            sent: 0,
            skipped: 0,
            fell_behind: 0,
            burst: 1,
        }
    }

    /// The same pacer in iperf3's burst mode: `datagrams` at once, then a wait until the rate
    /// has caught up with them (at least 1; the step becomes the burst).
    pub fn with_burst(mut self, datagrams: u64) -> Self {
        let burst = datagrams.max(1);
        self.burst = burst;
        self.with_burst_cap(burst)
    }

    /// The same pacer with a different step (and skip threshold, if smaller), in datagrams
    /// (at least 1).
    pub fn with_burst_cap(mut self, datagrams: u64) -> Self {
        self.burst_cap = datagrams.max(1);
        self.max_backlog = self.max_backlog.max(self.burst_cap);
        self
    }

    /// The most datagrams [`Pacer::allowed`] returns at once.
    pub fn burst_cap(&self) -> u64 {
        self.burst_cap
    }

    /// Datagrams the stream may have sent by `now` since `start`, ignoring the caps.
    fn entitled(&self, now: Duration) -> u64 {
        let Some(elapsed) = now.checked_sub(self.start) else { return 0 };
        let bits = elapsed.as_nanos().saturating_mul(u128::from(self.bits_per_second));
        let n = bits / (u128::from(self.datagram_bits) * NANOS_PER_SECOND);
        let due = u64::try_from(n).unwrap_or(u64::MAX);
        // Whole bursts: the one that datagram `due` belongs to has all its datagrams due.
        (due / self.burst).saturating_add(1).saturating_mul(self.burst)
    }

    /// The catch-up bucket's tolerance: a full bucket holds `burst_cap` datagrams.
    fn tolerance_ns(&self) -> u128 {
        u128::from(self.burst_cap - 1) * self.catch_up_interval_ns
    }

    /// Datagrams the catch-up bucket lets go at `now`.
    fn catch_up_allows(&self, now: Duration) -> u64 {
        let now_ns = now.saturating_sub(self.start).as_nanos();
        let earliest = self.catch_up_tat_ns.max(now_ns);
        let limit = now_ns + self.tolerance_ns();
        if earliest > limit {
            return 0;
        }
        let extra = (limit - earliest).checked_div(self.catch_up_interval_ns).unwrap_or(u128::MAX);
        u64::try_from(extra).unwrap_or(u64::MAX).saturating_add(1)
    }

    /// When the next datagram may go (in the past if the sender is behind). `start` when the
    /// rate is unlimited.
    pub fn next_send_at(&self) -> Duration {
        if self.bits_per_second == 0 {
            return self.start;
        }
        // In burst mode the next burst is due when its first datagram is.
        let first = self.used / self.burst * self.burst;
        let bits_ns =
            (u128::from(first) * u128::from(self.datagram_bits)).saturating_mul(NANOS_PER_SECOND);
        let schedule_ns = bits_ns.div_ceil(u128::from(self.bits_per_second));
        let catch_up_ns = self.catch_up_tat_ns.saturating_sub(self.tolerance_ns());
        self.start.saturating_add(duration_from_nanos(schedule_ns.max(catch_up_ns)))
    }

    /// How many datagrams may be sent at `now`: the unused entitlement, at most what the
    /// catch-up bucket allows and [`Pacer::burst_cap`]. `u64::MAX` when the rate is unlimited
    /// (send what the socket takes).
    pub fn allowed(&self, now: Duration) -> u64 {
        if self.bits_per_second == 0 {
            return u64::MAX;
        }
        let owed = self.entitled(now).saturating_sub(self.used).min(self.max_backlog);
        owed.min(self.burst_cap).min(self.catch_up_allows(now))
    }

    /// Records that `n_datagrams` were sent at `now`. If the sender was more than
    /// [`CATCH_UP_LIMIT`] behind at `now`, the excess is skipped first (and counted), so it is
    /// never sent later.
    pub fn on_sent(&mut self, n_datagrams: u64, now: Duration) {
        if self.bits_per_second != 0 {
            let backlog = self.entitled(now).saturating_sub(self.used);
            if backlog > self.max_backlog {
                let skip = backlog - self.max_backlog;
                self.used = self.used.saturating_add(skip);
                self.skipped = self.skipped.saturating_add(skip);
                self.fell_behind += 1;
            }
            let now_ns = now.saturating_sub(self.start).as_nanos();
            let step = u128::from(n_datagrams).saturating_mul(self.catch_up_interval_ns);
            self.catch_up_tat_ns = self.catch_up_tat_ns.max(now_ns).saturating_add(step);
        }
        self.used = self.used.saturating_add(n_datagrams);
        self.sent = self.sent.saturating_add(n_datagrams);
    }

    /// Datagrams reported sent.
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// Datagrams given up because the sender fell more than [`CATCH_UP_LIMIT`] behind.
    pub fn skipped_datagrams(&self) -> u64 {
        self.skipped
    }

    /// How many times the sender fell more than [`CATCH_UP_LIMIT`] behind.
    pub fn fell_behind(&self) -> u64 {
        self.fell_behind
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::udp::burst::BurstStats;

    const GBIT: u64 = 1_000_000_000;
    const DATAGRAM_BYTES: u32 = 1472;

    /// Runs a sender for `run` that wakes `lateness(i)` after each `next_send_at`.
    fn simulate(p: &mut Pacer, run: Duration, mut lateness: impl FnMut(u64) -> Duration) {
        let start = p.next_send_at();
        let mut burst = BurstStats::new(BURST_WINDOW);
        let mut now = start;
        let mut wake = 0;
        while now < start + run {
            let n = p.allowed(now);
            assert!((1..=p.burst_cap()).contains(&n), "woke with nothing to send or burst {n}");
            p.on_sent(n, now);
            burst.record(now, n);
            wake += 1;
            now = p.next_send_at().max(now) + lateness(wake);
        }
        let report = burst.report();
        // Never more than about twice the even share of any 1 ms (84.9 datagrams at 1G).
        let share = per_window(p.bits_per_second, p.datagram_bits, BURST_WINDOW);
        assert!(report.max_in_window <= 2 * share + 2, "{report:?}");
    }

    fn xorshift(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    /// `-b 10M/10`: ten datagrams at once, then a wait of ten datagrams' time, and the rate
    /// over a second as without bursts.
    #[test]
    fn burst_mode_sends_whole_bursts_at_the_rate() {
        let rate = 10_000_000;
        let mut p = Pacer::new(rate, DATAGRAM_BYTES, Duration::from_secs(5)).with_burst(10);
        let start = p.next_send_at();
        let mut now = start;
        let mut wakes = Vec::new();
        while now < start + Duration::from_secs(1) {
            assert_eq!(p.allowed(now), 10, "a whole burst at {now:?}");
            p.on_sent(10, now);
            wakes.push(now);
            now = p.next_send_at();
            assert_eq!(p.allowed(now - Duration::from_nanos(1)), 0, "nothing before it is due");
        }
        let ten = u128::from(10 * 8 * DATAGRAM_BYTES as u64) * NANOS_PER_SECOND / u128::from(rate);
        assert!(wakes.windows(2).all(|w| (w[1] - w[0]).as_nanos().abs_diff(ten) <= 1), "{wakes:?}");
        let even = rate / (8 * u64::from(DATAGRAM_BYTES));
        assert!(p.sent().abs_diff(even) <= 10, "{} datagrams in 1 s, {even} even", p.sent());
    }

    #[test]
    fn punctual_sender_gets_exactly_the_rate() {
        let mut p = Pacer::new(GBIT, DATAGRAM_BYTES, Duration::from_secs(50));
        assert_eq!(p.burst_cap(), 42, "half of 1 ms of 1 Gbit/s in 11776-bit datagrams");
        simulate(&mut p, Duration::from_secs(1), |_| Duration::ZERO);
        // 10^9 / 11776 = 84918.5 intervals in the second, +1 for the one at start.
        assert_eq!(p.sent(), 84_919);
        assert_eq!((p.fell_behind(), p.skipped_datagrams()), (0, 0));
        assert_eq!(
            p.next_send_at(),
            Duration::from_secs(50) + Duration::from_nanos(84_919 * 11_776)
        );
    }

    #[test]
    fn jittery_wakeups_average_within_a_thousandth_and_never_exceed_the_cap() {
        let mut state = 0x2545_f491_4f6c_dd1d;
        let mut p = Pacer::new(GBIT, DATAGRAM_BYTES, Duration::from_millis(3));
        simulate(&mut p, Duration::from_secs(1), |_| {
            Duration::from_nanos(xorshift(&mut state) % 500_000) // late by up to 0.5 ms
        });
        let ideal = 1e9 / 11776.0;
        let err = (p.sent() as f64 - ideal).abs() / ideal;
        assert!(err < 0.001, "sent {} vs {ideal}: {err}", p.sent());
        assert_eq!(p.fell_behind(), 0);
    }

    #[test]
    fn a_short_stall_is_caught_up_smoothly_without_skipping() {
        let mut p = Pacer::new(GBIT, DATAGRAM_BYTES, Duration::ZERO);
        simulate(&mut p, Duration::from_millis(100), |i| {
            if i == 100 { Duration::from_millis(5) } else { Duration::from_micros(20) }
        });
        assert_eq!((p.fell_behind(), p.skipped_datagrams()), (0, 0));
        let ideal = 100e6 / 11776.0;
        let err = p.sent() as f64 / ideal - 1.0;
        assert!(err.abs() < 0.001, "the 5 ms were caught up: {err}");
    }

    #[test]
    fn a_stall_longer_than_the_catch_up_limit_is_skipped_and_counted_not_burst() {
        let mut p = Pacer::new(GBIT, DATAGRAM_BYTES, Duration::ZERO);
        simulate(&mut p, Duration::from_millis(400), |i| {
            if i == 100 { Duration::from_millis(80) } else { Duration::from_micros(20) }
        });
        assert_eq!(p.fell_behind(), 1);
        // 80 ms behind = 6793 datagrams; 50 ms of them (4245) are caught up.
        let skipped = p.skipped_datagrams();
        assert!((2540..=2560).contains(&skipped), "{skipped}");
        let ideal = 400e6 / 11776.0;
        let err = (p.sent() + skipped) as f64 / ideal - 1.0;
        assert!(err.abs() < 0.001, "sent + skipped keeps the schedule: {err}");
    }

    #[test]
    fn before_start_nothing_and_unlimited_everything() {
        let p = Pacer::new(8_000, 1000, Duration::from_secs(1));
        assert_eq!(p.allowed(Duration::from_millis(999)), 0);
        assert_eq!(p.allowed(Duration::from_secs(1)), 1);
        assert_eq!(p.allowed(Duration::from_secs(3)), 1, "cap is at least 1");
        let mut u = Pacer::new(0, 1472, Duration::from_secs(1));
        assert_eq!(u.allowed(Duration::ZERO), u64::MAX);
        u.on_sent(1_000_000, Duration::from_secs(2));
        assert_eq!(
            (u.sent(), u.next_send_at(), u.fell_behind()),
            (1_000_000, Duration::from_secs(1), 0)
        );
    }

    #[test]
    fn slow_rate_schedule_and_custom_cap() {
        // 8 kbit/s of 1000-byte datagrams: one per second.
        let mut p = Pacer::new(8_000, 1000, Duration::ZERO).with_burst_cap(3);
        p.on_sent(1, Duration::ZERO);
        assert_eq!(p.next_send_at(), Duration::from_secs(1));
        assert_eq!(p.allowed(Duration::from_millis(999)), 0);
        assert_eq!(p.allowed(Duration::from_secs(10)), 3);
        p.on_sent(3, Duration::from_secs(10));
        assert_eq!((p.skipped_datagrams(), p.fell_behind()), (7, 1));
        assert_eq!(p.next_send_at(), Duration::from_secs(11));
        let odd = Pacer::new(3, 0, Duration::ZERO); // 3 bit/s of 1-byte datagrams
        assert_eq!(odd.burst_cap(), 1);
        let mut odd = odd;
        odd.on_sent(1, Duration::ZERO);
        assert_eq!(odd.next_send_at(), Duration::from_nanos(2_666_666_667), "rounded up");
    }

    #[test]
    fn extreme_values_do_not_panic() {
        let mut p = Pacer::new(u64::MAX, u32::MAX, Duration::MAX);
        let _ = p.allowed(Duration::ZERO);
        p.on_sent(u64::MAX, Duration::MAX);
        let _ = p.next_send_at();
        let q = Pacer::new(u64::MAX, 1, Duration::ZERO);
        assert_eq!(q.allowed(Duration::MAX), q.burst_cap());
    }
}
