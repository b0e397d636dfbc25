//! A fixed-memory histogram of durations with about 1.6 % relative precision.
//!
//! Log-linear buckets, as in HdrHistogram: below 64 ns one bucket per nanosecond (exact, so
//! a steady stream's |D| of 0 reads as 0); from 64 ns up to 2^34 ns (about 17 s) each
//! power-of-two octave is split into 32 equal buckets, so a bucket is at most 1/32 of its lower
//! bound wide and its midpoint is within 1/64 (1.6 %) of any value in it; one overflow bucket
//! above (its values are reported as the exact maximum). 961 counters (7.5 KiB), no
//! allocation after construction, exact count and maximum. It stores durations and nothing
//! else; what they mean is up to the owner (`jitter` feeds it |D| values).

use std::time::Duration;

const SUB_BITS: u32 = 5;
const SUB_BUCKETS: usize = 1 << SUB_BITS;
/// Values below 2^LINEAR_EXP nanoseconds have a bucket each.
const LINEAR_EXP: u32 = SUB_BITS + 1;
const LINEAR: usize = 1 << LINEAR_EXP;
/// Values at or above 2^TOP_EXP nanoseconds fall into the overflow bucket.
const TOP_EXP: u32 = 34;
const OVERFLOW: usize = LINEAR + (TOP_EXP - LINEAR_EXP) as usize * SUB_BUCKETS;
const BUCKETS: usize = OVERFLOW + 1;

/// Counts of durations in log-linear buckets; see the module docs for the precision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DurationHistogram {
    counts: Vec<u64>,
    total: u64,
    max_ns: u64,
}

impl Default for DurationHistogram {
    fn default() -> Self {
        Self::new()
    }
}

fn bucket_of(ns: u64) -> usize {
    if ns < 1 << LINEAR_EXP {
        return ns as usize;
    }
    if ns >= 1 << TOP_EXP {
        return OVERFLOW;
    }
    let msb = 63 - ns.leading_zeros();
    let sub = (ns >> (msb - SUB_BITS)) as usize & (SUB_BUCKETS - 1);
    LINEAR + (msb - LINEAR_EXP) as usize * SUB_BUCKETS + sub
}

/// The `[low, high)` nanosecond range of bucket `i` (below the overflow bucket).
fn bounds_of(i: usize) -> (u64, u64) {
    if i < LINEAR {
        return (i as u64, i as u64 + 1);
    }
    let octave = ((i - LINEAR) / SUB_BUCKETS) as u32;
    let sub = ((i - LINEAR) % SUB_BUCKETS) as u64;
    let msb = octave + LINEAR_EXP;
    let width = 1u64 << (msb - SUB_BITS);
    let low = (1u64 << msb) + sub * width;
    (low, low + width)
}

impl DurationHistogram {
    /// An empty histogram.
    pub fn new() -> Self {
        Self { counts: vec![0; BUCKETS], total: 0, max_ns: 0 }
    }

    /// Counts one duration.
    pub fn record(&mut self, value: Duration) {
        let ns = u64::try_from(value.as_nanos()).unwrap_or(u64::MAX);
        if let Some(c) = self.counts.get_mut(bucket_of(ns)) {
            *c += 1;
        }
        self.total += 1;
        self.max_ns = self.max_ns.max(ns);
    }

    /// How many durations were recorded.
    pub fn count(&self) -> u64 {
        self.total
    }

    /// The largest duration recorded (exact); None if empty.
    pub fn max(&self) -> Option<Duration> {
        (self.total > 0).then(|| Duration::from_nanos(self.max_ns))
    }

    /// The `q`-quantile (0.0..=1.0, clamped): the midpoint of the bucket holding the value of
    /// rank `ceil(q × count)`, never above the maximum. None if empty.
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        if self.total == 0 {
            return None;
        }
        let q = if q.is_nan() { 1.0 } else { q.clamp(0.0, 1.0) };
        let rank = ((q * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0u64;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let ns = if i == OVERFLOW {
                    self.max_ns
                } else {
                    let (low, high) = bounds_of(i);
                    (low + (high - low) / 2).min(self.max_ns)
                };
                return Some(Duration::from_nanos(ns));
            }
        }
        self.max()
    }

    /// Adds another histogram's counts (e.g. to sum the streams of a test).
    pub fn merge(&mut self, other: &Self) {
        for (mine, theirs) in self.counts.iter_mut().zip(&other.counts) {
            *mine += theirs;
        }
        self.total += other.total;
        self.max_ns = self.max_ns.max(other.max_ns);
    }

    /// Forgets everything recorded.
    pub fn reset(&mut self) {
        self.counts.fill(0);
        self.total = 0;
        self.max_ns = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_tile_the_range_in_order_and_hold_their_values() {
        let mut prev = 0;
        let mut v = 0u64;
        while v < 1 << TOP_EXP {
            let i = bucket_of(v);
            assert!(i >= prev, "bucket index is monotone at {v}");
            let (low, high) = bounds_of(i);
            assert!(low <= v && v < high, "{v} in [{low}, {high})");
            if v >= 1 << LINEAR_EXP {
                assert!((high - low) * 32 <= low, "width at most 1/32 of low at {v}");
            }
            prev = i;
            v = v + 1 + v / 37;
        }
        assert_eq!(bucket_of((1 << TOP_EXP) - 1), OVERFLOW - 1);
        assert_eq!(bucket_of(1 << TOP_EXP), OVERFLOW);
        assert_eq!(bucket_of(u64::MAX), OVERFLOW);
        assert_eq!(bounds_of(OVERFLOW - 1).1, 1 << TOP_EXP);
    }

    #[test]
    fn quantiles_are_within_two_percent() {
        let mut h = DurationHistogram::new();
        for us in 1..=1000u64 {
            h.record(Duration::from_micros(us));
        }
        for (q, want_us) in [(0.5, 500.0), (0.99, 990.0), (0.01, 10.0), (1.0, 1000.0)] {
            let got = h.quantile(q).unwrap().as_nanos() as f64 / 1000.0;
            assert!((got - want_us).abs() / want_us < 0.02, "q{q}: {got} µs vs {want_us}");
        }
        assert_eq!(h.max(), Some(Duration::from_micros(1000)));
        assert_eq!(h.quantile(0.0), Some(Duration::from_nanos(1000)), "rank 1: 992..1008 ns");
        assert_eq!(h.count(), 1000);
    }

    #[test]
    fn small_large_and_empty() {
        let mut h = DurationHistogram::new();
        assert_eq!((h.quantile(0.5), h.max()), (None, None));
        h.record(Duration::from_nanos(100));
        assert_eq!(h.quantile(0.5), Some(Duration::from_nanos(100)), "clamped to max");
        h.record(Duration::from_nanos(700));
        assert_eq!(h.quantile(1.0), Some(Duration::from_nanos(696)), "688..704 ns midpoint");
        assert_eq!(h.quantile(0.5), Some(Duration::from_nanos(101)), "100..102 ns midpoint");
        h.record(Duration::from_nanos(7));
        assert_eq!(h.quantile(0.0), Some(Duration::from_nanos(7)), "exact below 64 ns");
        h.record(Duration::from_secs(20));
        h.record(Duration::MAX);
        assert_eq!(h.quantile(0.99), Some(Duration::from_nanos(u64::MAX)));
        assert_eq!(h.quantile(f64::NAN), h.max());
        h.reset();
        assert_eq!((h.count(), h.max()), (0, None));
    }

    #[test]
    fn merge_sums_counts_and_keeps_the_larger_max() {
        let mut a = DurationHistogram::new();
        let mut b = DurationHistogram::new();
        for _ in 0..90 {
            a.record(Duration::from_micros(10));
        }
        for _ in 0..10 {
            b.record(Duration::from_millis(3));
        }
        a.merge(&b);
        assert_eq!(a.count(), 100);
        assert_eq!(a.max(), Some(Duration::from_millis(3)));
        let p50 = a.quantile(0.5).unwrap().as_nanos() as f64;
        let p95 = a.quantile(0.95).unwrap().as_nanos() as f64;
        assert!((p50 - 10_000.0).abs() < 200.0, "{p50}");
        assert!((p95 - 3_000_000.0).abs() < 60_000.0, "{p95}");
    }
}
