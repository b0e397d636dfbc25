//! A trend's other figures: the path's RTT, the senders' retransmits and (UDP) the loss of
//! each run, watched like the rate (`stats::drift`), because a path that keeps its rate while
//! its RTT doubles (a queue filling somewhere) or that starts to lose more is news too.
//!
//! Each is worse when higher, so its fresh signal is a **rise**: the last one or two runs above
//! every earlier run since the last change of the rate, by at least the practical threshold
//! and the prediction test (the fresh drop's tests on the negated figures). A drift is found in
//! either direction (Mann–Kendall is two-sided) and reported with its sign. A figure that was
//! zero in the runs before (no retransmits, no loss) has no ratio to rise by and is not judged:
//! the first loss on a clean path is in the runs' table, not a trend's finding.
//!
//! The figures are the first direction's, as the rate is: the median of its sending streams'
//! smoothed RTT over the test's intervals (the final sample when there are none), their
//! retransmits, and the loss of its UDP streams.

use serde::Serialize;

use crate::record::RunRecord;
use crate::stats::change_point::Method;
use crate::stats::drift::{Drift, FreshDrop};

/// The path figures of one run (None: not measured, or not this kind of test).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct PathFigures {
    /// The first direction's senders' smoothed RTT while loaded (median over the intervals),
    /// seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rtt_seconds: Option<f64>,
    /// The first direction's senders' retransmits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retransmits: Option<f64>,
    /// The first direction's UDP loss, percent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loss_percent: Option<f64>,
}

/// The path figures of `record`.
pub fn of(record: &RunRecord) -> PathFigures {
    let summary = crate::stats::summarize(record);
    let Some(first) = summary.directions.first() else { return PathFigures::default() };
    let word = match first.flow {
        linerate_proto::Flow::ClientToServer => "to_target",
        linerate_proto::Flow::ServerToClient => "from_target",
    };
    // One summary of the record each: the probe's figures are read once, not once a figure.
    let figures = crate::stats::probe::probe_figures(record);
    let figure = |name: &str| {
        figures.iter().find(|f| f.name == name && f.of.1 == word).and_then(|f| f.value.ok())
    };
    let udp = summary.udp.iter().find(|u| u.flow == first.flow);
    PathFigures {
        rtt_seconds: loaded_rtt(record, first.flow).or_else(|| figure("rtt_seconds")),
        retransmits: figure("retransmits"),
        loss_percent: udp.and_then(|u| u.loss_percent),
    }
}

/// The median of the smoothed RTT samples of `flow`'s sending streams over the test's
/// intervals (warm-up left out): the RTT while the path was loaded. The final sample alone is
/// taken after the senders stopped, when a queue that filled during the test has drained
/// (seen: 3-5 ms at the end of tests whose queue held 30 ms). None without interval samples.
fn loaded_rtt(record: &RunRecord, flow: linerate_proto::Flow) -> Option<f64> {
    let mut rtts: Vec<f64> = record
        .all_streams()
        .filter(|(_, s)| s.flow == flow && s.role == linerate_proto::StreamRole::Sender)
        .flat_map(|(_, s)| s.intervals.iter())
        .filter(|i| !i.omitted)
        .filter_map(|i| i.tcp.as_ref())
        .map(|t| f64::from(t.rtt_us) / 1e6)
        .collect();
    if rtts.is_empty() {
        return None;
    }
    rtts.sort_by(f64::total_cmp);
    Some(crate::stats::sample::median_of_sorted(&rtts))
}

/// What one figure of a series says.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PathSignal {
    /// `rtt_seconds`, `retransmits` or `loss_percent`.
    pub figure: &'static str,
    /// Runs that measured it.
    pub runs: usize,
    /// The last one or two runs well above the ones before (`relative` > 0: the rise).
    pub fresh_rise: Option<FreshDrop>,
    /// A steady rise or fall.
    pub drift: Option<Drift>,
}

/// Reads one figure of a run.
type Figure = fn(&PathFigures) -> Option<f64>;

/// The figures of `points` (oldest first) with a finding; `last_change` is the index of the
/// first run after the rate's last change.
pub fn signals(points: &[PathFigures], last_change: usize, m: &Method) -> Vec<PathSignal> {
    let pick: [(&'static str, Figure); 3] = [
        ("rtt_seconds", |p| p.rtt_seconds),
        ("retransmits", |p| p.retransmits),
        ("loss_percent", |p| p.loss_percent),
    ];
    let mut out = Vec::new();
    for (figure, get) in pick {
        // The runs after the rate's last change that measured it.
        let values: Vec<f64> =
            points[last_change.min(points.len())..].iter().filter_map(get).collect();
        if values.len() < crate::stats::drift::DRIFT_MIN_RUNS {
            continue;
        }
        let negated: Vec<f64> = values.iter().map(|v| -v).collect();
        let (fresh, _) = crate::stats::drift::watch(&negated, m);
        let fresh_rise = fresh.map(|f| {
            let (before, after) = (-f.before, -f.after);
            FreshDrop { before, after, relative: (after - before) / before.abs(), ..f }
        });
        let drift = crate::stats::drift::watch(&values, m).1;
        if fresh_rise.is_some() || drift.is_some() {
            out.push(PathSignal { figure, runs: values.len(), fresh_rise, drift });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::sample::tests::{Rng, noisy};

    fn rtts(v: &[f64]) -> Vec<PathFigures> {
        v.iter().map(|r| PathFigures { rtt_seconds: Some(*r), ..Default::default() }).collect()
    }

    #[test]
    fn an_rtt_that_doubled_in_the_last_two_runs_is_a_fresh_rise() {
        let mut rng = Rng(3);
        let mut v = noisy(&mut rng, 12, 0.005, 0.03);
        v.extend(noisy(&mut rng, 2, 0.010, 0.03));
        let s = signals(&rtts(&v), 0, &Method::default());
        assert_eq!(s.len(), 1, "{s:?}");
        let f = s[0].fresh_rise.as_ref().expect("a rise");
        assert_eq!((s[0].figure, f.runs, f.before_runs), ("rtt_seconds", 2, 12));
        assert!((f.relative - 1.0).abs() < 0.1 && f.after > f.before, "{f:?}");
        // Flat: nothing; a figure never measured: nothing.
        assert!(
            signals(&rtts(&noisy(&mut rng, 14, 0.005, 0.03)), 0, &Method::default()).is_empty()
        );
        assert!(signals(&[PathFigures::default(); 14], 0, &Method::default()).is_empty());
    }

    #[test]
    fn zero_before_is_not_judged_by_ratio() {
        let mut v = vec![0.0; 12];
        v.extend([40.0, 55.0]);
        let p: Vec<PathFigures> =
            v.iter().map(|r| PathFigures { retransmits: Some(*r), ..Default::default() }).collect();
        assert!(signals(&p, 0, &Method::default()).iter().all(|s| s.fresh_rise.is_none()));
    }
}
