//! Two latency runs side by side (`linerate compare A B` of two request/response runs, or of
//! two tests under load): each figure of A and of B and the change, B against A.
//!
//! Single runs only: one run per side gives no spread, so no significance test is claimed
//! (the verdict of the throughput comparison says so for bulk runs too); the change is the
//! plain relative difference. Also what kind of test a run is, so that a request/response run
//! is never compared with a bulk run as if their figures measured one thing. Pure.

use serde::Serialize;

use crate::record::RunRecord;
use crate::stats::Summary;
use crate::stats::latency::PERCENTILES;
use crate::stats::under_load::UnderLoadSummary;

/// What a stored run measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TestKind {
    /// Throughput (TCP or UDP).
    Bulk,
    /// Transactions and their latency (`--rr`).
    RequestResponse,
    /// Throughput with latency probes beside it (`--under-load`).
    UnderLoad,
}

impl TestKind {
    /// The kind of `record`'s test.
    pub fn of(record: &RunRecord) -> TestKind {
        match (record.spec.rr.is_some(), record.probes.is_some()) {
            (true, _) => TestKind::RequestResponse,
            (false, true) => TestKind::UnderLoad,
            (false, false) => TestKind::Bulk,
        }
    }

    /// In words, for an error: "a request/response test (--rr)".
    pub fn words(self) -> &'static str {
        match self {
            TestKind::Bulk => "a bulk throughput test",
            TestKind::RequestResponse => "a request/response test (--rr)",
            TestKind::UnderLoad => "a test under load (--under-load)",
        }
    }
}

/// One figure of A and B.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FigureChange {
    /// Which figure: `transactions_per_second`, `p50_ns`, `loaded_p99_ns`, `rpm`, …
    pub figure: String,
    /// A's value (None: not measured).
    pub a: Option<f64>,
    /// B's value.
    pub b: Option<f64>,
    /// (B − A) / |A| × 100; None without both or when A is 0.
    pub change_percent: Option<f64>,
    /// Whether higher is better (a rate, RPM) or lower (a latency, a cost).
    pub higher_is_better: bool,
}

fn change(figure: &str, a: Option<f64>, b: Option<f64>, higher_is_better: bool) -> FigureChange {
    let change_percent = match (a, b) {
        (Some(a), Some(b)) if a != 0.0 && a.is_finite() && b.is_finite() => {
            Some((b - a) / a.abs() * 100.0)
        }
        _ => None,
    };
    FigureChange { figure: figure.to_string(), a, b, change_percent, higher_is_better }
}

fn ns(v: Option<u64>) -> Option<f64> {
    v.map(|v| v as f64)
}

/// A request/response run against another: transactions per second, the latency extremes,
/// percentiles and mean, and CPU per transaction.
fn request_response(a: &Summary, b: &Summary) -> Option<Vec<FigureChange>> {
    let (a, b) = (a.latency.as_ref()?, b.latency.as_ref()?);
    let mut out = vec![change(
        "transactions_per_second",
        a.transactions_per_second,
        b.transactions_per_second,
        true,
    )];
    out.push(change("min_ns", ns(a.min_ns), ns(b.min_ns), false));
    for (((key, _, _), x), y) in PERCENTILES.iter().zip(a.percentiles()).zip(b.percentiles()) {
        out.push(change(key, ns(x), ns(y), false));
    }
    out.push(change("max_ns", ns(a.max_ns), ns(b.max_ns), false));
    out.push(change("mean_ns", ns(a.mean_ns), ns(b.mean_ns), false));
    for (key, x, y) in [
        (
            "client_cpu_us_per_transaction",
            a.client_cpu_us_per_transaction,
            b.client_cpu_us_per_transaction,
        ),
        (
            "server_cpu_us_per_transaction",
            a.server_cpu_us_per_transaction,
            b.server_cpu_us_per_transaction,
        ),
    ] {
        out.push(change(key, x, y, false));
    }
    Some(out)
}

/// A test under load against another: both phases' p50 and p99, the added median, RPM.
fn under_load(a: &Summary, b: &Summary) -> Option<Vec<FigureChange>> {
    let (a, b) = (a.under_load.as_ref()?, b.under_load.as_ref()?);
    type Pick = fn(&UnderLoadSummary) -> Option<f64>;
    let figures: [(&str, Pick); 5] = [
        ("idle_p50_ns", |u| ns(u.idle.as_ref()?.p50_ns)),
        ("idle_p99_ns", |u| ns(u.idle.as_ref()?.p99_ns)),
        ("loaded_p50_ns", |u| ns(u.loaded.as_ref()?.p50_ns)),
        ("loaded_p99_ns", |u| ns(u.loaded.as_ref()?.p99_ns)),
        ("added_p50_ns", |u| u.added_p50_ns.map(|v| v as f64)),
    ];
    let mut out: Vec<FigureChange> =
        figures.iter().map(|(key, pick)| change(key, pick(a), pick(b), false)).collect();
    let rpm = |u: &UnderLoadSummary| u.responsiveness.as_ref().map(|r| r.rpm);
    out.push(change("rpm", rpm(a), rpm(b), true));
    Some(out)
}

/// Two runs' latency figures side by side.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LatencyComparison {
    /// Both runs' kind: `request_response` or `under_load`.
    pub kind: TestKind,
    /// Each figure of A and B, and the change.
    pub figures: Vec<FigureChange>,
}

/// The latency figures of A and B side by side when both are request/response runs or both
/// tests under load; None otherwise.
pub fn compare_latency(a: &Summary, b: &Summary) -> Option<LatencyComparison> {
    if let Some(figures) = request_response(a, b) {
        return Some(LatencyComparison { kind: TestKind::RequestResponse, figures });
    }
    under_load(a, b).map(|figures| LatencyComparison { kind: TestKind::UnderLoad, figures })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_are_relative_to_a_and_missing_figures_stay_missing() {
        let c = change("p50_ns", Some(200.0), Some(150.0), false);
        assert_eq!(c.change_percent, Some(-25.0));
        assert_eq!(change("x", None, Some(1.0), true).change_percent, None);
        assert_eq!(change("x", Some(0.0), Some(1.0), true).change_percent, None);
        assert_eq!(change("x", Some(1.0), Some(f64::NAN), true).change_percent, None);
    }
}
