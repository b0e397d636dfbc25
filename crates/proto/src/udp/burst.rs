//! How bursty a UDP sender really was, measured from its own send times.
//!
//! Two figures, both cheap enough to keep on every stream:
//!
//! * **Peak window count**: the most datagrams sent within any sliding window (default 1 ms),
//!   exact, over the whole run. Compared with what the target rate allows in that window
//!   ([`BurstReport::burstiness`]) it reads as "sent at N times the intended rate for a
//!   millisecond": ≈ 1 for smooth pacing, 100 for iperf3's 100 ms catch-up bursts at 1 Gbit/s.
//!   This is what overflows switch buffers and receive queues.
//! * **Inter-send gap statistics**: mean, maximum and coefficient of variation (standard
//!   deviation / mean) of the gaps between consecutive datagrams, datagrams of one batch
//!   (`sendmmsg`, GSO) counting as gaps of 0. CV is 0 for a perfect metronome, about 1 for
//!   random (Poisson) sending, and grows with batching (k datagrams per batch gives about
//!   sqrt(k − 1)). The maximum gap shows stalls.
//!
//! Send times should not decrease; an earlier time is taken as the latest one seen. Memory is
//! one entry per `record` call inside the window. Reads no clock; the sender passes the times.

use std::collections::VecDeque;
use std::time::Duration;

/// Burstiness of one sender; see the module docs.
#[derive(Debug, Clone, PartialEq)]
pub struct BurstStats {
    window: Duration,
    recent: VecDeque<(Duration, u64)>,
    in_window: u64,
    max_in_window: u64,
    datagrams: u64,
    last: Option<Duration>,
    gaps: u64,
    gap_mean_ns: f64,
    gap_m2: f64,
    max_gap: Duration,
}

/// A plain copy of a sender's burstiness figures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BurstReport {
    /// Datagrams recorded.
    pub datagrams: u64,
    /// The sliding window length.
    pub window: Duration,
    /// Most datagrams sent within any window (send times less than `window` apart).
    pub max_in_window: u64,
    /// Mean gap between consecutive datagrams, nanoseconds; None with fewer than 2 datagrams.
    pub gap_mean_ns: Option<f64>,
    /// Coefficient of variation of the gaps (population standard deviation / mean); None with
    /// fewer than 2 datagrams or a mean of 0.
    pub gap_cv: Option<f64>,
    /// The longest gap between consecutive datagrams.
    pub max_gap: Duration,
}

impl BurstReport {
    /// Datagrams the target rate allows within one window: rate × window / datagram bits.
    pub fn ideal_in_window(&self, bits_per_second: u64, datagram_bytes: u32) -> f64 {
        let bits = f64::from(datagram_bytes.max(1)) * 8.0;
        bits_per_second as f64 * self.window.as_secs_f64() / bits
    }

    /// The peak window count over the ideal one: how many times the target rate the sender
    /// reached over its worst window. None for an unlimited rate (0) or no datagrams.
    pub fn burstiness(&self, bits_per_second: u64, datagram_bytes: u32) -> Option<f64> {
        let ideal = self.ideal_in_window(bits_per_second, datagram_bytes);
        (ideal > 0.0 && self.datagrams > 0).then(|| self.max_in_window as f64 / ideal)
    }
}

impl BurstStats {
    /// Empty statistics with a sliding window of `window` (see [`super::BURST_WINDOW`]).
    pub fn new(window: Duration) -> Self {
        Self {
            window,
            recent: VecDeque::new(),
            in_window: 0,
            max_in_window: 0,
            datagrams: 0,
            last: None,
            gaps: 0,
            gap_mean_ns: 0.0,
            gap_m2: 0.0,
            max_gap: Duration::ZERO,
        }
    }

    /// Records `n_datagrams` sent together at `send_time` (0 is ignored).
    pub fn record(&mut self, send_time: Duration, n_datagrams: u64) {
        if n_datagrams == 0 {
            return;
        }
        let t = self.last.map_or(send_time, |last| send_time.max(last));
        if let Some(last) = self.last {
            let gap = t - last;
            self.max_gap = self.max_gap.max(gap);
            self.add_gaps(gap.as_nanos() as f64, 1);
        }
        self.add_gaps(0.0, n_datagrams - 1);
        self.last = Some(t);
        self.datagrams = self.datagrams.saturating_add(n_datagrams);
        self.slide(t, n_datagrams);
    }

    /// Adds `k` gaps of `value_ns` to the running mean and sum of squares (Chan et al.'s
    /// parallel form of Welford's update, so a batch costs O(1)).
    fn add_gaps(&mut self, value_ns: f64, k: u64) {
        if k == 0 {
            return;
        }
        let n_a = self.gaps as f64;
        let n_b = k as f64;
        let n = n_a + n_b;
        let delta = value_ns - self.gap_mean_ns;
        self.gap_mean_ns += delta * n_b / n;
        self.gap_m2 += delta * delta * n_a * n_b / n;
        self.gaps = self.gaps.saturating_add(k);
    }

    fn slide(&mut self, t: Duration, n: u64) {
        self.recent.push_back((t, n));
        self.in_window = self.in_window.saturating_add(n);
        while let Some(&(old, count)) = self.recent.front() {
            if t - old < self.window {
                break;
            }
            self.recent.pop_front();
            self.in_window -= count;
        }
        self.max_in_window = self.max_in_window.max(self.in_window);
    }

    /// The figures so far.
    pub fn report(&self) -> BurstReport {
        let has_gaps = self.gaps > 0;
        let cv = (has_gaps && self.gap_mean_ns > 0.0)
            .then(|| (self.gap_m2 / self.gaps as f64).sqrt() / self.gap_mean_ns);
        BurstReport {
            datagrams: self.datagrams,
            window: self.window,
            max_in_window: self.max_in_window,
            gap_mean_ns: has_gaps.then_some(self.gap_mean_ns),
            gap_cv: cv,
            max_gap: self.max_gap,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn metronome_is_smooth() {
        let mut b = BurstStats::new(MS);
        for i in 0..10_000u64 {
            b.record(Duration::from_micros(10 * i), 1); // 100 k datagrams/s
        }
        let r = b.report();
        assert_eq!(r.max_in_window, 100, "times 10 µs apart, less than 1 ms between ends");
        assert_eq!(r.gap_mean_ns, Some(10_000.0));
        assert!(r.gap_cv.unwrap() < 1e-9);
        assert_eq!(r.max_gap, Duration::from_micros(10));
        // 100 k datagrams/s of 1250 bytes = 1 Gbit/s.
        let burst = r.burstiness(1_000_000_000, 1250).unwrap();
        assert!((burst - 1.0).abs() < 1e-9, "{burst}");
    }

    #[test]
    fn batches_show_in_window_peak_and_cv() {
        let mut b = BurstStats::new(MS);
        for i in 0..1000u64 {
            b.record(Duration::from_micros(100 * i), 10); // same rate, batches of 10
        }
        let r = b.report();
        assert_eq!(r.datagrams, 10_000);
        assert_eq!(r.max_in_window, 100, "10 batches of 10 per window");
        // Gaps: nine 0s and one 100 µs per batch (the first batch has no leading gap).
        let n = 9999.0;
        let mean = 999.0 * 100_000.0 / n;
        let var = 999.0 * (100_000.0f64 - mean).powi(2) / n + 9000.0 * mean * mean / n;
        let cv = var.sqrt() / mean;
        assert!((r.gap_mean_ns.unwrap() - mean).abs() < 1e-6);
        assert!((r.gap_cv.unwrap() - cv).abs() < 1e-9, "{:?} vs {cv}", r.gap_cv);
        assert!((cv - 3.0).abs() < 0.01, "batches of 10 give about sqrt(9)");
    }

    #[test]
    fn a_100ms_catch_up_burst_reads_as_100_times_the_rate() {
        let mut b = BurstStats::new(MS);
        // 1 Gbit/s in 1250-byte datagrams is 100 per ms; a sender 100 ms late sends 10_000
        // back to back within 0.5 ms.
        for i in 0..10_000u64 {
            b.record(Duration::from_secs(1) + Duration::from_nanos(50 * i), 1);
        }
        let r = b.report();
        assert_eq!(r.max_in_window, 10_000);
        assert!((r.burstiness(1_000_000_000, 1250).unwrap() - 100.0).abs() < 1e-9);
    }

    #[test]
    fn edge_cases() {
        let mut b = BurstStats::new(MS);
        assert_eq!(b.report().gap_mean_ns, None);
        assert_eq!(b.report().burstiness(1000, 100), None);
        b.record(Duration::from_secs(5), 0);
        b.record(Duration::from_secs(5), 3);
        b.record(Duration::from_secs(4), 1); // earlier: taken as 5 s
        let r = b.report();
        assert_eq!((r.datagrams, r.max_in_window, r.max_gap), (4, 4, Duration::ZERO));
        assert_eq!((r.gap_mean_ns, r.gap_cv), (Some(0.0), None));
        assert_eq!(r.burstiness(0, 100), None, "unlimited rate has no ideal");
        b.record(Duration::from_secs(7), 1);
        assert_eq!(b.report().max_gap, Duration::from_secs(2));
    }
}
