//! Jitter of one UDP stream: RFC 3550's running estimate, and the distribution behind it.
//!
//! For each datagram, transit = arrival time − send time (two different clocks: only changes
//! of transit mean anything), and D = transit − previous transit. RFC 3550 (and iperf3) report
//! J, updated as `J += (|D| − J) / 16`; linerate computes it the same way, in f64 seconds, so
//! its figure is comparable to iperf3's. iperf3 takes |transit| before subtracting; linerate
//! keeps the sign, which only differs if transit changes sign (clocks within a few ms of each
//! other), where iperf3's D is wrong.
//!
//! J is an exponential average with a 16-datagram memory: it hides rare large spikes and
//! depends on the packet rate (iperf3 issues #204, #755). So [`JitterMeter`] also keeps every
//! |D| in a [`DurationHistogram`] (1.6 % precision, fixed memory) and reports its median, 99th
//! percentile and maximum: |D| is the IP packet delay variation between consecutive datagrams
//! (IPDV, RFC 5481).
//!
//! Feed only datagrams that the sequence tracker classified as in order
//! (`Arrival::InOrder`): a late datagram's transit belongs to another point of the stream, and
//! RFC 3550 defines D between consecutive packets. Datagrams after a gap (loss) are in order
//! and count. This module does no sequence accounting and reads no clock.

use std::time::Duration;

use crate::histogram::DurationHistogram;

/// RFC 3550 jitter plus the distribution of |D| for one stream; see the module docs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JitterMeter {
    prev_transit_ns: Option<i128>,
    jitter_seconds: f64,
    ipdv: DurationHistogram,
}

/// A plain copy of a jitter meter's figures.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct JitterSummary {
    /// RFC 3550 jitter, seconds (iperf3's `jitter_ms` / 1000).
    pub jitter_seconds: f64,
    /// How many |D| values were recorded (in-order datagrams after the first).
    pub samples: u64,
    /// Median |D|; None without samples.
    pub ipdv_p50: Option<Duration>,
    /// 99th percentile of |D|; None without samples.
    pub ipdv_p99: Option<Duration>,
    /// Largest |D|; None without samples.
    pub ipdv_max: Option<Duration>,
}

fn signed_ns(d: Duration) -> i128 {
    // Duration::as_nanos is below 2^94, so it always fits in i128.
    i128::try_from(d.as_nanos()).unwrap_or(i128::MAX)
}

impl JitterMeter {
    /// A meter that has seen nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Accounts one in-order datagram: sent at `send_time` on the sender's clock (from its
    /// header), received at `arrival` on the receiver's clock.
    pub fn on_in_order(&mut self, send_time: Duration, arrival: Duration) {
        let transit_ns = signed_ns(arrival) - signed_ns(send_time);
        if let Some(prev) = self.prev_transit_ns.replace(transit_ns) {
            let d_ns = u64::try_from((transit_ns - prev).unsigned_abs()).unwrap_or(u64::MAX);
            let d_seconds = d_ns as f64 / 1e9;
            self.jitter_seconds += (d_seconds - self.jitter_seconds) / 16.0;
            self.ipdv.record(Duration::from_nanos(d_ns));
        }
    }

    /// RFC 3550 jitter so far, in seconds.
    pub fn jitter_seconds(&self) -> f64 {
        self.jitter_seconds
    }

    /// The distribution of |D| so far.
    pub fn ipdv(&self) -> &DurationHistogram {
        &self.ipdv
    }

    /// The figures now.
    pub fn summary(&self) -> JitterSummary {
        JitterSummary {
            jitter_seconds: self.jitter_seconds,
            samples: self.ipdv.count(),
            ipdv_p50: self.ipdv.quantile(0.5),
            ipdv_p99: self.ipdv.quantile(0.99),
            ipdv_max: self.ipdv.max(),
        }
    }

    /// Zeroes J and the |D| distribution, as iperf3 does at the end of the omitted warm-up.
    /// The previous transit is kept, so the next datagram still yields a D.
    pub fn reset(&mut self) {
        self.jitter_seconds = 0.0;
        self.ipdv.reset();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn rfc3550_by_hand() {
        // Sender's clock 1000 s ahead of the receiver's: transits are negative, only D matters.
        let mut m = JitterMeter::new();
        let mut js = Vec::new();
        for (i, transit_ms) in [10u64, 12, 11, 15].into_iter().enumerate() {
            let send = Duration::from_secs(1000) + ms(20 * i as u64);
            let arrival = ms(20 * i as u64 + transit_ms);
            m.on_in_order(send, arrival);
            js.push(m.jitter_seconds());
        }
        // D = 2, 1, 4 ms: J = 2/16 = 0.125; 0.125 + (1 − 0.125)/16 = 0.1796875;
        // 0.1796875 + (4 − 0.1796875)/16 = 0.41845703125 (ms).
        let want = [0.0, 0.125e-3, 0.1796875e-3, 0.41845703125e-3];
        for (got, want) in js.iter().zip(want) {
            assert!((got - want).abs() < 1e-15, "{got} vs {want}");
        }
        let s = m.summary();
        assert_eq!(s.samples, 3);
        assert_eq!(s.ipdv_max, Some(ms(4)));
        let p50 = s.ipdv_p50.unwrap().as_nanos() as f64;
        assert!((p50 - 2e6).abs() / 2e6 < 0.02, "median D is 2 ms, got {p50} ns");
        assert_eq!(s.ipdv_p99.unwrap(), ms(4), "p99 of 3 is the largest (clamped to max)");
    }

    #[test]
    fn constant_transit_is_zero_jitter_and_first_datagram_sets_no_d() {
        let mut m = JitterMeter::new();
        m.on_in_order(ms(5), ms(7));
        assert_eq!(m.summary(), JitterSummary { jitter_seconds: 0.0, ..Default::default() });
        for i in 1..100 {
            m.on_in_order(ms(5 + i), ms(7 + i));
        }
        let s = m.summary();
        assert_eq!((s.jitter_seconds, s.samples, s.ipdv_max), (0.0, 99, Some(Duration::ZERO)));
    }

    #[test]
    fn one_spike_moves_j_by_a_sixteenth_but_shows_in_the_max() {
        let mut m = JitterMeter::new();
        for i in 0..1000u64 {
            let extra_ms = if i == 500 { 16 } else { 0 };
            m.on_in_order(ms(i), ms(i + 1 + extra_ms));
        }
        let s = m.summary();
        assert_eq!(s.ipdv_max, Some(ms(16)));
        assert_eq!(s.ipdv_p50, Some(Duration::ZERO));
        assert!(s.jitter_seconds < 1e-6, "J has decayed: {}", s.jitter_seconds);
    }

    #[test]
    fn reset_zeroes_figures_but_keeps_previous_transit() {
        let mut m = JitterMeter::new();
        m.on_in_order(ms(0), ms(10));
        m.on_in_order(ms(1), ms(13));
        assert!(m.jitter_seconds() > 0.0);
        m.reset();
        assert_eq!(m.summary().samples, 0);
        assert_eq!(m.jitter_seconds(), 0.0);
        m.on_in_order(ms(2), ms(14)); // transit 12 after 12: D = 0
        assert_eq!(m.ipdv().count(), 1);
        assert_eq!(m.ipdv().max(), Some(Duration::ZERO));
    }

    #[test]
    fn extreme_times_do_not_panic() {
        let mut m = JitterMeter::new();
        m.on_in_order(Duration::MAX, Duration::ZERO);
        m.on_in_order(Duration::ZERO, Duration::MAX);
        assert!(m.jitter_seconds().is_finite() && m.jitter_seconds() > 0.0);
    }
}
