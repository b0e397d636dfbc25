//! The figures of a request/response test (`--rr`): transactions per second, latency
//! percentiles from the streams' histograms merged, and what a transaction cost each end.
//!
//! Percentiles are those of every transaction of every stream after the warm-up (the merged
//! histograms, 1.6 % precision; min, max and mean exact), not means of per-stream percentiles.
//! The rate is the sum of each stream's transactions over its own measured time, as the bulk
//! figures sum each stream's bytes over its own time. CPU per transaction divides each end's
//! process CPU over the whole test by every transaction it served, warm-up included, since the
//! CPU meter covers the warm-up too.

use linerate_proto::histogram::DurationHistogram;
use linerate_proto::{SideResults, StreamRole};
use serde::Serialize;

use crate::record::RunRecord;

/// The percentiles reported, as (JSON key, quantile, label).
pub const PERCENTILES: [(&str, f64, &str); 5] = [
    ("p50_ns", 0.50, "p50"),
    ("p90_ns", 0.90, "p90"),
    ("p99_ns", 0.99, "p99"),
    ("p99_9_ns", 0.999, "p99.9"),
    ("p99_99_ns", 0.9999, "p99.99"),
];

/// A request/response test's answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LatencySummary {
    /// Streams that reported transactions.
    pub streams: u32,
    /// Transactions after the warm-up, all streams.
    pub transactions: u64,
    /// Their rate: each stream's transactions over its measured time, summed.
    pub transactions_per_second: Option<f64>,
    /// `closed` (as fast as responses allow) or `open` (requests at a fixed rate).
    pub loop_kind: &'static str,
    /// True when latencies run from each request's intended send time (open loop).
    pub from_intended_send: bool,
    /// Requests without a response when their stream ended.
    pub unanswered: u64,
    /// UDP: requests with no response within the loss timeout.
    pub lost: u64,
    /// Open loop: requests sent more than an interval after they were due.
    pub late_requests: u64,
    /// Exact extremes and mean, and the percentiles of [`PERCENTILES`], nanoseconds.
    pub min_ns: Option<u64>,
    /// Median.
    pub p50_ns: Option<u64>,
    /// 90th percentile.
    pub p90_ns: Option<u64>,
    /// 99th percentile.
    pub p99_ns: Option<u64>,
    /// 99.9th percentile.
    pub p99_9_ns: Option<u64>,
    /// 99.99th percentile.
    pub p99_99_ns: Option<u64>,
    /// Largest latency (exact).
    pub max_ns: Option<u64>,
    /// Mean latency (exact).
    pub mean_ns: Option<u64>,
    /// The client's process CPU per transaction, microseconds.
    pub client_cpu_us_per_transaction: Option<f64>,
    /// The server's process CPU per transaction, microseconds.
    pub server_cpu_us_per_transaction: Option<f64>,
    /// `--crr`: the connect, first-byte and close phases, every stream merged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phases: Option<CrrPhaseSummary>,
    /// Every stream's latencies merged (for CDFs; not serialized: the record has them).
    #[serde(skip)]
    pub histogram: DurationHistogram,
}

/// The phases of `--crr` transactions (`docs/METHODOLOGY.md`, "Latency").
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CrrPhaseSummary {
    /// From the connect call until the connection is up.
    pub connect: PhaseFigures,
    /// From the request written until the first response byte.
    pub first_byte: PhaseFigures,
    /// From the last response byte until the server's close arrived.
    pub close: PhaseFigures,
}

/// One phase's median, 99th percentile and maximum, nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PhaseFigures {
    /// Median.
    pub p50_ns: Option<u64>,
    /// 99th percentile.
    pub p99_ns: Option<u64>,
    /// Largest (exact).
    pub max_ns: Option<u64>,
}

impl PhaseFigures {
    fn of(h: &DurationHistogram) -> Self {
        Self {
            p50_ns: h.quantile(0.5).map(ns),
            p99_ns: h.quantile(0.99).map(ns),
            max_ns: h.max().map(ns),
        }
    }
}

impl LatencySummary {
    /// The percentile figures in [`PERCENTILES`] order.
    pub fn percentiles(&self) -> [Option<u64>; 5] {
        [self.p50_ns, self.p90_ns, self.p99_ns, self.p99_9_ns, self.p99_99_ns]
    }
}

fn ns(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The cumulative distribution of `histogram` for a CDF chart: one point per non-empty
/// bucket, `(latency_ns, share of the values at or below it)`, rising to 1 at the exact
/// maximum. A bucket's values are placed at its lower bound (within 1.6 % of each), clamped to
/// the exact minimum and maximum; empty for an empty histogram.
pub fn cdf(histogram: &DurationHistogram) -> Vec<(u64, f64)> {
    let (Some(min), Some(max)) = (histogram.min().map(ns), histogram.max().map(ns)) else {
        return Vec::new();
    };
    let total = histogram.count() as f64;
    let mut below = 0u64;
    histogram
        .buckets()
        .map(|(low, n)| {
            below += n;
            (low.clamp(min, max), below as f64 / total)
        })
        .collect()
}

/// The latency figures of a request/response run; None for any other test.
pub fn summarize_latency(record: &RunRecord) -> Option<LatencySummary> {
    record.spec.rr?;
    let client = record.client.as_ref()?;
    let measured: Vec<_> = client
        .streams
        .iter()
        .filter(|s| s.role == StreamRole::Sender)
        .filter_map(|s| Some((s, s.latency.as_deref()?)))
        .collect();
    if measured.is_empty() {
        return None;
    }
    let mut histogram = DurationHistogram::new();
    let (mut unanswered, mut lost, mut late, mut all) = (0, 0, 0, 0);
    let mut rate: Option<f64> = None;
    let mut phases: Option<linerate_proto::latency::CrrPhases> = None;
    for (s, l) in &measured {
        histogram.merge(&l.histogram);
        if let Some(p) = &l.phases {
            let all = phases.get_or_insert_with(Default::default);
            all.connect.merge(&p.connect);
            all.first_byte.merge(&p.first_byte);
            all.close.merge(&p.close);
        }
        unanswered += l.unanswered;
        lost += l.lost;
        late += l.late_requests;
        all += l.transactions + l.omitted_transactions;
        let secs = s.measured_us() as f64 / 1e6;
        if secs > 0.0 {
            *rate.get_or_insert(0.0) += l.transactions as f64 / secs;
        }
    }
    let [p50_ns, p90_ns, p99_ns, p99_9_ns, p99_99_ns] =
        PERCENTILES.map(|(_, p, _)| histogram.quantile(p).map(ns));
    let per_transaction = |side: Option<&SideResults>| {
        let cpu = side?.cost.as_ref()?.process?;
        (all > 0).then(|| (cpu.user_us + cpu.system_us) as f64 / all as f64)
    };
    let open = measured[0].1.from_intended_send;
    Some(LatencySummary {
        streams: measured.len() as u32,
        transactions: histogram.count(),
        transactions_per_second: rate,
        loop_kind: if open { "open" } else { "closed" },
        from_intended_send: open,
        unanswered,
        lost,
        late_requests: late,
        min_ns: histogram.min().map(ns),
        p50_ns,
        p90_ns,
        p99_ns,
        p99_9_ns,
        p99_99_ns,
        max_ns: histogram.max().map(ns),
        mean_ns: histogram.mean().map(ns),
        client_cpu_us_per_transaction: per_transaction(Some(client)),
        server_cpu_us_per_transaction: per_transaction(record.server_results.as_ref()),
        phases: phases.map(|p| CrrPhaseSummary {
            connect: PhaseFigures::of(&p.connect),
            first_byte: PhaseFigures::of(&p.first_byte),
            close: PhaseFigures::of(&p.close),
        }),
        histogram,
    })
}

/// A run's latency in brief, for a listing of runs: a request/response run's rate and
/// percentiles, a test under load's idle and loaded probe medians and responsiveness.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LatencyBrief {
    /// Request/response: transactions per second.
    pub transactions_per_second: Option<f64>,
    /// Request/response: median latency, nanoseconds.
    pub p50_ns: Option<u64>,
    /// Request/response: 99th percentile, nanoseconds.
    pub p99_ns: Option<u64>,
    /// Under load: the idle probes' median, nanoseconds.
    pub idle_p50_ns: Option<u64>,
    /// Under load: the loaded probes' median, nanoseconds.
    pub loaded_p50_ns: Option<u64>,
    /// Under load: round trips per minute.
    pub rpm: Option<f64>,
    /// Under load: the RPM's rating (`low`, `medium`, `high`).
    pub rating: Option<&'static str>,
}

/// The brief of a run's summary; None for a run that is neither request/response nor under
/// load.
pub fn brief(summary: &crate::stats::Summary) -> Option<LatencyBrief> {
    let (l, u) = (summary.latency.as_ref(), summary.under_load.as_ref());
    if l.is_none() && u.is_none() {
        return None;
    }
    let rpm = u.and_then(|u| u.responsiveness.as_ref());
    Some(LatencyBrief {
        transactions_per_second: l.and_then(|l| l.transactions_per_second),
        p50_ns: l.and_then(|l| l.p50_ns),
        p99_ns: l.and_then(|l| l.p99_ns),
        idle_p50_ns: u.and_then(|u| u.idle.as_ref()?.p50_ns),
        loaded_p50_ns: u.and_then(|u| u.loaded.as_ref()?.p50_ns),
        rpm: rpm.map(|r| r.rpm),
        rating: rpm.map(|r| r.rating),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cdf_rises_from_the_minimum_to_one_at_the_maximum() {
        assert!(cdf(&DurationHistogram::new()).is_empty());
        let mut h = DurationHistogram::new();
        h.record_ns(10_050, 3);
        h.record_ns(20_000, 1);
        h.record_ns(5_000_000, 1);
        let c = cdf(&h);
        assert_eq!(c.len(), 3, "{c:?}");
        assert_eq!(c[0], (10_050, 0.6), "the first bucket starts at the exact minimum");
        assert!(c[1].0 <= 20_000 && c[1].0 * 33 >= 20_000 * 32 && c[1].1 == 0.8, "{c:?}");
        assert!(c[2].1 == 1.0 && c[2].0 <= 5_000_000 && c[2].0 * 33 >= 5_000_000 * 32, "{c:?}");
        assert!(c.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 < w[1].1), "{c:?}");
    }
}
