//! The figures of a probe (`/probe?target=IP:PORT` of a server's metrics endpoint): one short
//! bidirectional TCP test from the server to the target, read as throughput each way, the
//! senders' retransmits and smoothed RTT, and what it cost each end's CPU.
//!
//! A figure the test did not produce is not made up: it is [`Missing`], with a word saying
//! why, and the endpoint shows it as `linerate_probe_figure_missing{figure, reason}` instead
//! of a value. An iperf3 target reports no TCP internals and no CPU of its own; a failed test
//! has no figures at all.

use linerate_proto::{Flow, StreamRole};

use crate::record::{End, Outcome, RunRecord};
use crate::stats::summarize;

/// Why a figure is missing: a fixed word, fit for a metric label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missing {
    /// The test failed (refused, unreachable, cut): it produced no figures.
    TestFailed,
    /// The end that would have measured it did not report it (an iperf3 peer, an older
    /// linerate, a kernel without the counter).
    NotReported,
    /// It reported its cost, without this figure (the probe could not be read on its host).
    NotMeasured,
}

impl Missing {
    /// The label word.
    pub fn word(self) -> &'static str {
        match self {
            Self::TestFailed => "test_failed",
            Self::NotReported => "not_reported",
            Self::NotMeasured => "not_measured",
        }
    }
}

/// One figure of a probe: which, for what (`direction` or `end`), and its value or why none.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeFigure {
    /// The figure, as the metric's name ends: `bits_per_second`, `retransmits`,
    /// `rtt_seconds`, `cpu_percent_of_core`.
    pub name: &'static str,
    /// What it is of: `("direction", "to_target" | "from_target")` or `("end", "prober" |
    /// "target")`.
    pub of: (&'static str, &'static str),
    /// The value, or why there is none.
    pub value: Result<f64, Missing>,
}

/// The directions of a probe: the prober (the test's client) sends to the target, and the
/// target sends back.
const DIRECTIONS: [(Flow, &str); 2] =
    [(Flow::ClientToServer, "to_target"), (Flow::ServerToClient, "from_target")];

/// Every figure of a probe's test, each with its value or why it is missing.
pub fn probe_figures(record: &RunRecord) -> Vec<ProbeFigure> {
    let failed = matches!(record.outcome, Outcome::Failed { .. });
    let summary = summarize(record);
    let mut out = Vec::new();
    for (flow, word) in DIRECTIONS {
        let of = ("direction", word);
        let dir = summary.directions.iter().find(|d| d.flow == flow);
        let received = dir
            .and_then(|d| d.receiver.as_ref())
            .and_then(|r| r.figures.bits_per_second)
            .ok_or(Missing::NotReported);
        let retransmits = dir
            .and_then(|d| d.sender.as_ref())
            .and_then(|s| s.retransmits)
            .map(|r| r as f64)
            .ok_or(Missing::NotReported);
        out.push(ProbeFigure { name: "bits_per_second", of, value: received });
        out.push(ProbeFigure { name: "retransmits", of, value: retransmits });
        out.push(ProbeFigure { name: "rtt_seconds", of, value: sender_rtt(record, flow) });
    }
    for (end, word) in [(End::Client, "prober"), (End::Server, "target")] {
        let cost = summary.cost.iter().find(|c| c.end == end);
        let value = match cost {
            None => Err(Missing::NotReported),
            Some(c) => c.process_percent_of_core.ok_or(Missing::NotMeasured),
        };
        out.push(ProbeFigure { name: "cpu_percent_of_core", of: ("end", word), value });
    }
    if failed {
        for f in &mut out {
            f.value = Err(Missing::TestFailed);
        }
    }
    out
}

/// The mean of the final smoothed RTT (TCP_INFO) of the streams sending `flow`, in seconds.
fn sender_rtt(record: &RunRecord, flow: Flow) -> Result<f64, Missing> {
    let rtts: Vec<f64> = record
        .all_streams()
        .filter(|(_, s)| s.flow == flow && s.role == StreamRole::Sender)
        .filter_map(|(_, s)| s.tcp.as_ref())
        .map(|t| f64::from(t.rtt_us) / 1e6)
        .collect();
    if rtts.is_empty() {
        return Err(Missing::NotReported);
    }
    Ok(rtts.iter().sum::<f64>() / rtts.len() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The upload fixture: two TCP streams from the client, both ends' figures and costs.
    fn upload() -> RunRecord {
        let json = include_str!("../../tests/fixtures/records/tcp_upload.json");
        serde_json::from_str(json).expect("fixture")
    }

    fn value(figures: &[ProbeFigure], name: &str, of: &str) -> Result<f64, Missing> {
        let f = figures.iter().find(|f| f.name == name && f.of.1 == of);
        f.unwrap_or_else(|| panic!("no {name} of {of}")).value
    }

    #[test]
    fn a_one_way_test_gives_its_figures_and_says_why_the_others_are_missing() {
        let record = upload();
        let figures = probe_figures(&record);
        assert_eq!(figures.len(), 8, "three figures each way and the CPU of each end");
        let rate = value(&figures, "bits_per_second", "to_target").expect("the receiver's rate");
        let want = summarize(&record).directions[0].receiver.as_ref().map(|r| r.figures);
        assert_eq!(Some(rate), want.and_then(|f| f.bits_per_second));
        assert_eq!(value(&figures, "bits_per_second", "from_target"), Err(Missing::NotReported));
        assert_eq!(value(&figures, "rtt_seconds", "from_target"), Err(Missing::NotReported));
    }

    #[test]
    fn a_failed_probe_has_no_figure_and_says_why() {
        let mut record = upload();
        record.outcome = Outcome::Failed { error: "refused".into(), kind: None };
        let figures = probe_figures(&record);
        assert!(figures.iter().all(|f| f.value == Err(Missing::TestFailed)), "{figures:?}");
    }
}
