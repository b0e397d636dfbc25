//! A socket setting that follows a flow's own rate: the receivers' wake-up batching
//! (`SO_RCVLOWAT`, [`super::tcp::WakeBatcher`]) and the senders' unsent-queue limit
//! (`TCP_NOTSENT_LOWAT`, [`super::unsent`]) both hold "a span of time's worth of the rate
//! measured over the last window", within bounds, and change only by more than a quarter so
//! noise does not cost a `setsockopt` per call.

use std::time::{Duration, Instant};

/// A flow's rate measured over windows of [`RateFollower::WINDOW`]: what the followers here
/// and an unpaced UDP receiver's naps (`udp::receive`) are computed from.
#[derive(Debug)]
pub struct RateWindow {
    start: Instant,
    bytes_at: u64,
}

impl RateWindow {
    /// A window starting `now` at a byte total of 0.
    pub fn new(now: Instant) -> Self {
        Self { start: now, bytes_at: 0 }
    }

    /// Feeds the flow's running byte total; once a window is over, the bytes it carried and
    /// its length, and the next window starts.
    pub fn sample(&mut self, total: u64, now: Instant) -> Option<(u64, Duration)> {
        let elapsed = now.saturating_duration_since(self.start);
        if elapsed < RateFollower::WINDOW {
            return None;
        }
        let bytes = total.saturating_sub(self.bytes_at);
        (self.start, self.bytes_at) = (now, total);
        Some((bytes, elapsed))
    }
}

/// Re-measures a flow's rate every [`RateFollower::WINDOW`] and proposes `span` of it.
#[derive(Debug)]
pub struct RateFollower {
    span: Duration,
    min: u32,
    max: u32,
    window: RateWindow,
    current: u32,
}

impl RateFollower {
    /// How often the rate is re-measured.
    pub const WINDOW: Duration = Duration::from_millis(50);

    /// A follower whose value is `current` now, proposing `span` of the rate within
    /// `min..=max`.
    pub fn new(now: Instant, current: u32, span: Duration, min: u32, max: u32) -> Self {
        Self { span, min, max, window: RateWindow::new(now), current }
    }

    /// Feeds the flow's running byte total; once a window is over, the value its rate asks
    /// for if that differs from the current one by more than a quarter. The caller applies
    /// it and then [`RateFollower::keep`]s it.
    pub fn propose(&mut self, total: u64, now: Instant) -> Option<u32> {
        let (bytes, elapsed) = self.window.sample(total, now)?;
        let target = span_of_rate(bytes, elapsed, self.span)
            .clamp(u64::from(self.min), u64::from(self.max)) as u32;
        changed_enough(self.current, target).then_some(target)
    }

    /// Records `value` as the one now in effect.
    pub fn keep(&mut self, value: u32) {
        self.current = value;
    }
}

/// `span` of the rate `bytes` in `elapsed` make, in bytes (0 for no time).
pub fn span_of_rate(bytes: u64, elapsed: Duration, span: Duration) -> u64 {
    let secs = elapsed.as_secs_f64();
    if secs <= 0.0 {
        return 0;
    }
    (bytes as f64 * span.as_secs_f64() / secs) as u64
}

/// Whether `target` differs from `current` by more than a quarter.
fn changed_enough(current: u32, target: u32) -> bool {
    target < current - current / 4 || target > current + current / 4
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_changes_do_not_reset_the_value() {
        let k = 128 * 1024;
        assert!(!changed_enough(k, k + k / 8));
        assert!(changed_enough(k, k * 2));
        assert!(changed_enough(k * 2, k));
    }
}
