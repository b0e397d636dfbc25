//! A fixed-memory histogram of durations with about 1.6 % relative precision.
//!
//! One histogram serves every distribution of durations linerate reports: UDP's transit
//! variation (`udp::jitter`) and request/response latency (`latency`). Latency percentiles
//! up to p99.99 need far finer bins than netperf's one-digit ones, and a stored run must let a
//! report recompute any percentile and draw the CDF, so the counts themselves serialize
//! (sparse: only non-empty buckets, each named by its lower bound in nanoseconds).
//!
//! Log-linear buckets, as in HdrHistogram: below 64 ns one bucket per nanosecond (exact, so
//! a steady stream's |D| of 0 reads as 0); from 64 ns up to 2^34 ns (about 17 s) each
//! power-of-two octave is split into 32 equal buckets, so a bucket is at most 1/32 of its lower
//! bound wide and its midpoint is within 1/64 (1.6 %) of any value in it; one overflow bucket
//! above (its values are reported as the exact maximum). 961 counters (7.5 KiB), no
//! allocation after construction, exact count, minimum, maximum and sum (for the mean). It
//! stores durations and nothing else; what they mean is up to the owner (`jitter` feeds it
//! |D| values, `latency` round trips).

use std::time::Duration;

use serde::{Deserialize, Serialize};

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
    min_ns: u64,
    max_ns: u64,
    sum_ns: u64,
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
        Self { counts: vec![0; BUCKETS], total: 0, min_ns: u64::MAX, max_ns: 0, sum_ns: 0 }
    }

    /// Counts one duration.
    pub fn record(&mut self, value: Duration) {
        let ns = u64::try_from(value.as_nanos()).unwrap_or(u64::MAX);
        self.record_ns(ns, 1);
    }

    /// Counts `n` durations of `ns` nanoseconds each.
    pub fn record_ns(&mut self, ns: u64, n: u64) {
        if n == 0 {
            return;
        }
        if let Some(c) = self.counts.get_mut(bucket_of(ns)) {
            *c = c.saturating_add(n);
        }
        self.total = self.total.saturating_add(n);
        self.min_ns = self.min_ns.min(ns);
        self.max_ns = self.max_ns.max(ns);
        self.sum_ns = self.sum_ns.saturating_add(ns.saturating_mul(n));
    }

    /// The smallest duration recorded (exact); None if empty.
    pub fn min(&self) -> Option<Duration> {
        (self.total > 0).then(|| Duration::from_nanos(self.min_ns))
    }

    /// The mean of the durations recorded (exact); None if empty.
    pub fn mean(&self) -> Option<Duration> {
        Some(Duration::from_nanos(self.sum_ns.checked_div(self.total)?))
    }

    /// The non-empty buckets in order: each bucket's lower bound in nanoseconds (the exact
    /// maximum for the overflow bucket) and its count. A CDF is their running sum.
    pub fn buckets(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.counts.iter().enumerate().filter(|(_, c)| **c > 0).map(|(i, &c)| {
            let low = if i == OVERFLOW { self.max_ns } else { bounds_of(i).0 };
            (low, c)
        })
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

    /// The mean of the smallest `keep` share of the values (0.0..=1.0; a single-sided trimmed
    /// mean, as the responsiveness draft takes at 95 %), from the bucket midpoints (exact
    /// below 64 ns, within 1.6 % above). None if empty.
    pub fn trimmed_mean(&self, keep: f64) -> Option<Duration> {
        if self.total == 0 {
            return None;
        }
        let keep = if keep.is_nan() { 1.0 } else { keep.clamp(0.0, 1.0) };
        let wanted = ((keep * self.total as f64).ceil() as u64).clamp(1, self.total);
        let (mut taken, mut sum) = (0u64, 0f64);
        for (i, &c) in self.counts.iter().enumerate().filter(|(_, c)| **c > 0) {
            let n = c.min(wanted - taken);
            let value = if i == OVERFLOW {
                self.max_ns
            } else {
                let (low, high) = bounds_of(i);
                (low + (high - low) / 2).min(self.max_ns).max(self.min_ns)
            };
            sum += value as f64 * n as f64;
            taken += n;
            if taken == wanted {
                break;
            }
        }
        Some(Duration::from_nanos((sum / taken as f64) as u64))
    }

    /// Adds another histogram's counts (e.g. to sum the streams of a test).
    pub fn merge(&mut self, other: &Self) {
        for (mine, theirs) in self.counts.iter_mut().zip(&other.counts) {
            *mine = mine.saturating_add(*theirs);
        }
        self.total = self.total.saturating_add(other.total);
        self.min_ns = self.min_ns.min(other.min_ns);
        self.max_ns = self.max_ns.max(other.max_ns);
        self.sum_ns = self.sum_ns.saturating_add(other.sum_ns);
    }

    /// Forgets everything recorded.
    pub fn reset(&mut self) {
        *self = Self::new();
    }
}

/// The stored form: the exact figures and the non-empty buckets as `[lower_ns, count]`.
#[derive(Serialize, Deserialize)]
struct Stored {
    count: u64,
    min_ns: Option<u64>,
    max_ns: Option<u64>,
    sum_ns: u64,
    buckets: Vec<(u64, u64)>,
}

impl Serialize for DurationHistogram {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        Stored {
            count: self.total,
            min_ns: self.min().map(|_| self.min_ns),
            max_ns: self.max().map(|_| self.max_ns),
            sum_ns: self.sum_ns,
            buckets: self.buckets().collect(),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for DurationHistogram {
    /// Rebuilds the counts from the buckets (a value is put in the bucket that holds it, so
    /// any lower bound reads back); the count is their sum and the extremes stay within
    /// them, whatever a stored or peer document claims.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let stored = Stored::deserialize(d)?;
        let mut h = Self::new();
        for (low, n) in stored.buckets {
            h.record_ns(low, n);
        }
        if h.total > 0 {
            if let Some(min) = stored.min_ns.filter(|m| bucket_of(*m) == bucket_of(h.min_ns)) {
                h.min_ns = min;
            }
            if let Some(max) = stored.max_ns.filter(|m| bucket_of(*m) == bucket_of(h.max_ns)) {
                h.max_ns = max;
            }
            let bounds = h.min_ns.saturating_mul(h.total)..=h.max_ns.saturating_mul(h.total);
            if bounds.contains(&stored.sum_ns) {
                h.sum_ns = stored.sum_ns;
            }
        }
        Ok(h)
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

    #[test]
    fn a_trimmed_mean_drops_the_largest_values() {
        let mut h = DurationHistogram::new();
        h.record_ns(10, 95);
        h.record_ns(1_000_000, 5);
        assert_eq!(h.trimmed_mean(0.95), Some(Duration::from_nanos(10)));
        assert_eq!(
            h.trimmed_mean(1.0),
            Some(Duration::from_nanos(50_009)),
            "the top bucket at its max"
        );
        assert_eq!(DurationHistogram::new().trimmed_mean(0.95), None);
    }

    #[test]
    fn the_stored_form_reads_back_and_stays_consistent_whatever_it_claims() {
        let mut h = DurationHistogram::new();
        for ns in [7, 900, 15_000, 15_100, 3_000_000, 40_000_000_000] {
            h.record_ns(ns, 2);
        }
        assert_eq!(h.min(), Some(Duration::from_nanos(7)));
        assert_eq!(h.mean(), Some(Duration::from_nanos(6_667_171_834)));
        let text = serde_json::to_string(&h).unwrap();
        let back: DurationHistogram = serde_json::from_str(&text).unwrap();
        assert_eq!(back, h);
        // A document whose count, extremes and sum disagree with its buckets is corrected by
        // them: the buckets are the data, the rest is derived.
        let lying =
            r#"{"count":99,"min_ns":1,"max_ns":5,"sum_ns":1,"buckets":[[1000,3],[2000,1]]}"#;
        let h: DurationHistogram = serde_json::from_str(lying).unwrap();
        assert_eq!(h.count(), 4);
        assert_eq!(
            (h.min(), h.max()),
            (Some(Duration::from_nanos(1000)), Some(Duration::from_nanos(2000)))
        );
        assert_eq!(h.mean(), Some(Duration::from_nanos(1250)));
        assert!(serde_json::from_str::<DurationHistogram>(r#"{"count":1}"#).is_err());
    }
}
