//! A matrix of request/response cells (`linerate matrix HOST --rr`): each cell's transactions
//! per second over its repetitions (mean with its 95 % confidence interval, Student t, lower
//! bound truncated at 0 as for rates), its p50 and p99 as the median across the runs of each
//! run's percentile (a run's percentiles are exact for that run; a median across runs resists
//! one disturbed run, as the rate's median does), and CPU per transaction; and the findings
//! that replace the throughput ones (a bit rate of request bytes says nothing). Pure.

use serde::Serialize;

use crate::stats::latency::LatencySummary;
use crate::stats::matrix::{CellSummary, rate_interval};
use crate::stats::sample::{SampleStats, describe};
use crate::units::format_latency_ns;

/// A request/response cell's figures over its completed runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CellLatency {
    /// Each run's transactions per second, described (mean, 95 % CI, min–max, …).
    pub transactions_per_second: Option<SampleStats>,
    /// Median across runs of each run's median latency, nanoseconds.
    pub p50_ns: Option<u64>,
    /// Median across runs of each run's 99th percentile, nanoseconds.
    pub p99_ns: Option<u64>,
    /// Mean across runs of the client's process CPU per transaction, microseconds.
    pub client_cpu_us_per_transaction: Option<f64>,
    /// The same for the server.
    pub server_cpu_us_per_transaction: Option<f64>,
}

fn median(mut v: Vec<u64>) -> Option<u64> {
    v.sort_unstable();
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some(v[n / 2 - 1] / 2 + v[n / 2] / 2 + (v[n / 2 - 1] % 2 + v[n / 2] % 2) / 2),
    }
}

fn mean(v: Vec<f64>) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// The figures of a cell's completed request/response runs; None without any.
pub fn cell_latency(runs: &[LatencySummary]) -> Option<CellLatency> {
    if runs.is_empty() {
        return None;
    }
    let rates: Vec<f64> = runs.iter().filter_map(|l| l.transactions_per_second).collect();
    Some(CellLatency {
        transactions_per_second: describe(&rates).map(rate_interval),
        p50_ns: median(runs.iter().filter_map(|l| l.p50_ns).collect()),
        p99_ns: median(runs.iter().filter_map(|l| l.p99_ns).collect()),
        client_cpu_us_per_transaction: mean(
            runs.iter().filter_map(|l| l.client_cpu_us_per_transaction).collect(),
        ),
        server_cpu_us_per_transaction: mean(
            runs.iter().filter_map(|l| l.server_cpu_us_per_transaction).collect(),
        ),
    })
}

/// The findings of a request/response matrix: the cell with the most transactions per second
/// (with its interval) and the one with the lowest p99.
pub fn findings(cells: &[CellSummary]) -> Vec<String> {
    fn of(c: &CellSummary) -> Option<&CellLatency> {
        c.latency.as_ref()
    }
    let rate = |c: &&CellSummary| of(c)?.transactions_per_second.as_ref().map(|s| s.mean);
    let mut out = Vec::new();
    let best = cells
        .iter()
        .filter(|c| rate(c).is_some())
        .max_by(|a, b| rate(a).unwrap_or(0.0).total_cmp(&rate(b).unwrap_or(0.0)));
    if let Some(c) = best.filter(|_| cells.len() > 1) {
        let s = of(c).and_then(|l| l.transactions_per_second.as_ref());
        let ci = s.and_then(|s| s.ci95_half_width).map_or(String::new(), |h| format!(" ± {h:.0}"));
        let runs = s.map_or(0, |s| s.n);
        out.push(format!(
            "most transactions: {} at {:.0}{ci} per second (mean of {runs} run(s), 95% CI)",
            c.label,
            rate(&c).unwrap_or(0.0)
        ));
    }
    let p99 = |c: &&CellSummary| of(c)?.p99_ns;
    if let Some(c) = cells.iter().filter(|c| p99(c).is_some()).min_by_key(|c| p99(c)) {
        if cells.len() > 1 {
            let v = p99(&c).map_or("n/a".into(), format_latency_ns);
            out.push(format!("lowest p99 latency: {} at {v} (median of its runs' p99)", c.label));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn the_median_of_whole_numbers_does_not_overflow() {
        assert_eq!(median(vec![]), None);
        assert_eq!(median(vec![3, 1, 2]), Some(2));
        assert_eq!(median(vec![4, 1]), Some(2));
        assert_eq!(median(vec![u64::MAX, u64::MAX]), Some(u64::MAX));
        assert_eq!(median(vec![3, 4]), Some(3));
    }
}
