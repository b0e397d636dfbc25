//! `linerate compare` of two fleets (`fA fB`): for two single fleets, each direction's total,
//! every host matched by its label, and how evenly the hosts and the flows shared (Jain's
//! index and the coefficient of variation) before and after; for two scaling curves, each
//! host count's mean total with its 95 % interval, before and after.
//!
//! **Which test.** The same as `compare` of runs and matrices (`stats::compare`): Welch's
//! test over repeated runs. A single fleet is one run per side, so its total and each host's
//! rate are one value a side and the verdict says "too few runs to test" with the change;
//! a scaling curve repeated with `--repeat` has one total per repetition, so each host count
//! is tested. The interval samples inside a run are not used as a sample: consecutive
//! seconds of one test are not independent runs, and `compare` of runs does not use them
//! either. Jain's index and the CV are one value per fleet run: their change is given,
//! never tested.
//!
//! A host or a direction only one side measured is listed, not dropped; a partial fleet (a
//! host not measured) is said, because its total is that of a smaller fleet.
//!
//! Pure; no I/O.

use linerate_proto::Flow;
use serde::Serialize;

use crate::stats::compare::{Comparison, compare};
use crate::stats::fleet::{FleetDirection, FleetSummary, Spread};
use crate::stats::scaling::{ScaleDirection, ScalePoint, ScaleSummary};

/// One figure of each side and its change (B − A); no test.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Pair {
    /// A's value (None: A has none, e.g. one host has no spread).
    pub a: Option<f64>,
    /// B's value.
    pub b: Option<f64>,
    /// B − A, when both have one.
    pub change: Option<f64>,
}

impl Pair {
    fn of(a: Option<f64>, b: Option<f64>) -> Self {
        Self { a, b, change: a.zip(b).map(|(a, b)| b - a) }
    }
}

/// How evenly rates were shared, A and B: Jain's index and the coefficient of variation.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Evenness {
    /// Jain's index (1 = all equal).
    pub jain: Pair,
    /// Standard deviation / mean.
    pub cv: Pair,
}

impl Evenness {
    fn of(a: Option<&Spread>, b: Option<&Spread>) -> Self {
        Self {
            jain: Pair::of(a.and_then(|s| s.jain), b.and_then(|s| s.jain)),
            cv: Pair::of(a.and_then(|s| s.cv), b.and_then(|s| s.cv)),
        }
    }
}

/// One host both fleets measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostChange {
    /// Its label (the same on both sides).
    pub label: String,
    /// Its rate (the sum of its flows in the shared window), A against B.
    pub result: Comparison,
}

/// A host only one side measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Unmatched {
    /// Its label.
    pub label: String,
    /// The side that measured it: `A` or `B`.
    pub measured_in: &'static str,
    /// Its rate there, bit/s.
    pub bits_per_second: f64,
    /// Why the other side has no figure: it has no host of that label, or did not measure it
    /// (with its error).
    pub other_side: String,
}

/// One direction both fleets ran.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DirectionChange {
    /// Which way.
    pub flow: Flow,
    /// The fleet's total, A against B.
    pub total: Comparison,
    /// Every host both measured, in A's order.
    pub hosts: Vec<HostChange>,
    /// Hosts only one side measured.
    pub unmatched: Vec<Unmatched>,
    /// Across hosts (each host's sum).
    pub across_hosts: Evenness,
    /// Across every flow of every host.
    pub across_flows: Evenness,
}

/// Two single fleets compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FleetChange {
    /// Hosts measured and planned, A.
    pub hosts_a: (usize, usize),
    /// Hosts measured and planned, B.
    pub hosts_b: (usize, usize),
    /// One per direction both ran.
    pub directions: Vec<DirectionChange>,
    /// Directions only one side ran: (direction, `A` or `B`).
    pub only_in: Vec<(Flow, &'static str)>,
    /// What the reader must know before reading a change (a partial fleet).
    pub notes: Vec<String>,
}

/// One host count of two curves.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PointChange {
    /// Hosts in the fleet.
    pub hosts: usize,
    /// A's 95 % interval of the mean total (None: fewer than two repetitions).
    pub ci95_a: Option<(f64, f64)>,
    /// B's.
    pub ci95_b: Option<(f64, f64)>,
    /// The totals of every whole repetition, A against B.
    pub result: Comparison,
    /// `A` or `B` when only that curve has this host count (not compared).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub only_in: Option<&'static str>,
}

/// One direction both curves ran.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CurveChange {
    /// Which way.
    pub flow: Flow,
    /// Every host count of either curve, ascending.
    pub points: Vec<PointChange>,
    /// Where A's total stops rising (see `stats::scaling`), and whether it may still rise.
    pub stops_rising_a: (Option<usize>, bool),
    /// B's.
    pub stops_rising_b: (Option<usize>, bool),
}

/// Two scaling curves compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScaleChange {
    /// One per direction both ran.
    pub directions: Vec<CurveChange>,
    /// Directions only one side ran.
    pub only_in: Vec<(Flow, &'static str)>,
}

/// The directions of both sides: (flow, A's, B's) for the shared ones, in A's order, and the
/// ones only one side has.
type Matched<'a, T> = (Vec<(Flow, &'a T, &'a T)>, Vec<(Flow, &'static str)>);

fn match_flows<'a, T>(a: &'a [T], b: &'a [T], flow: impl Fn(&T) -> Flow) -> Matched<'a, T> {
    let mut both = Vec::new();
    let mut only = Vec::new();
    for x in a {
        match b.iter().find(|y| flow(y) == flow(x)) {
            Some(y) => both.push((flow(x), x, y)),
            None => only.push((flow(x), "A")),
        }
    }
    only.extend(b.iter().filter(|y| !a.iter().any(|x| flow(x) == flow(y))).map(|y| (flow(y), "B")));
    (both, only)
}

/// Compares fleet B against fleet A at significance level `alpha`.
pub fn compare_fleets(a: &FleetSummary, b: &FleetSummary, alpha: f64) -> FleetChange {
    let (both, only_in) = match_flows(&a.directions, &b.directions, |d| d.flow);
    let directions = both.into_iter().map(|(flow, x, y)| direction(flow, (a, x), (b, y), alpha));
    let mut notes = Vec::new();
    for (side, s) in [("A", a), ("B", b)] {
        if s.hosts_measured < s.hosts_planned {
            notes.push(format!(
                "{side} is partial: {} of {} hosts measured, so its total is that of a smaller \
                 fleet",
                s.hosts_measured, s.hosts_planned
            ));
        }
    }
    FleetChange {
        hosts_a: (a.hosts_measured, a.hosts_planned),
        hosts_b: (b.hosts_measured, b.hosts_planned),
        directions: directions.collect(),
        only_in,
        notes,
    }
}

fn direction(
    flow: Flow,
    (fa, a): (&FleetSummary, &FleetDirection),
    (fb, b): (&FleetSummary, &FleetDirection),
    alpha: f64,
) -> DirectionChange {
    let hosts = a
        .hosts
        .iter()
        .filter_map(|x| {
            let y = b.hosts.iter().find(|y| y.label == x.label)?;
            let result = compare(&[x.bits_per_second], &[y.bits_per_second], alpha);
            Some(HostChange { label: x.label.clone(), result })
        })
        .collect();
    let mut unmatched = unmatched_of(("A", a), ("B", fb, b));
    unmatched.extend(unmatched_of(("B", b), ("A", fa, a)));
    DirectionChange {
        flow,
        total: compare(&[a.total_bits_per_second], &[b.total_bits_per_second], alpha),
        hosts,
        unmatched,
        across_hosts: Evenness::of(a.across_hosts.as_ref(), b.across_hosts.as_ref()),
        across_flows: Evenness::of(a.across_flows.as_ref(), b.across_flows.as_ref()),
    }
}

/// The hosts `side` measured that the other side did not.
fn unmatched_of(
    (side, d): (&'static str, &FleetDirection),
    (other, fleet, od): (&str, &FleetSummary, &FleetDirection),
) -> Vec<Unmatched> {
    d.hosts
        .iter()
        .filter(|h| !od.hosts.iter().any(|o| o.label == h.label))
        .map(|h| {
            let other_side = match fleet.not_measured.iter().find(|(l, _)| *l == h.label) {
                Some((_, why)) => format!("{other} did not measure it: {why}"),
                None => format!("{other} has no host {:?}", h.label),
            };
            Unmatched {
                label: h.label.clone(),
                measured_in: side,
                bits_per_second: h.bits_per_second,
                other_side,
            }
        })
        .collect()
}

/// Compares curve B against curve A at significance level `alpha`, host count by host count.
pub fn compare_curves(a: &ScaleSummary, b: &ScaleSummary, alpha: f64) -> ScaleChange {
    let (both, only_in) = match_flows(&a.directions, &b.directions, |d| d.flow);
    let directions = both.into_iter().map(|(flow, x, y)| curve(flow, x, y, alpha)).collect();
    ScaleChange { directions, only_in }
}

fn curve(flow: Flow, a: &ScaleDirection, b: &ScaleDirection, alpha: f64) -> CurveChange {
    let mut counts: Vec<usize> = a.points.iter().chain(&b.points).map(|p| p.hosts).collect();
    counts.sort_unstable();
    counts.dedup();
    let at = |d: &ScaleDirection, k: usize| d.points.iter().find(|p| p.hosts == k).cloned();
    let points = counts.into_iter().map(|k| point(k, at(a, k), at(b, k), alpha)).collect();
    CurveChange {
        flow,
        points,
        stops_rising_a: (a.stops_rising_at, a.still_rising),
        stops_rising_b: (b.stops_rising_at, b.still_rising),
    }
}

fn point(k: usize, a: Option<ScalePoint>, b: Option<ScalePoint>, alpha: f64) -> PointChange {
    let totals = |p: &Option<ScalePoint>| p.as_ref().map(|p| p.totals.clone()).unwrap_or_default();
    let ci = |p: &Option<ScalePoint>| p.as_ref()?.total.as_ref()?.ci95;
    let mut result = compare(&totals(&a), &totals(&b), alpha);
    let only_in = match (&a, &b) {
        (Some(_), None) => Some("A"),
        (None, Some(_)) => Some("B"),
        _ => None,
    };
    if let Some(side) = only_in {
        let other = if side == "A" { "B" } else { "A" };
        result.verdict = format!("not compared: only {side} ran {k} hosts ({other} did not)");
    }
    PointChange { hosts: k, ci95_a: ci(&a), ci95_b: ci(&b), result, only_in }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::fleet::HostFigures;
    use crate::stats::scaling::summarize_scaling;

    fn host(label: &str, bps: f64) -> HostFigures {
        HostFigures::for_tests(label, bps, vec![bps / 2.0, bps / 2.0])
    }

    fn fleet(hosts: &[(&str, f64)], not_measured: &[&str]) -> FleetSummary {
        let figures: Vec<HostFigures> = hosts.iter().map(|(l, b)| host(l, *b)).collect();
        FleetSummary::for_tests(Flow::ClientToServer, figures, not_measured)
    }

    #[test]
    fn single_fleets_match_hosts_by_label_and_name_the_rest() {
        let a = fleet(&[("vm1", 100e6), ("vm2", 100e6), ("vm3", 100e6)], &[]);
        let b = fleet(&[("vm2", 150e6), ("vm1", 50e6), ("vm4", 100e6)], &["vm3"]);
        let c = compare_fleets(&a, &b, 0.05);
        assert_eq!((c.hosts_a, c.hosts_b), ((3, 3), (3, 4)));
        assert!(c.notes[0].starts_with("B is partial: 3 of 4 hosts"), "{:?}", c.notes);
        let d = &c.directions[0];
        assert_eq!((d.total.mean_a, d.total.mean_b), (300e6, 300e6));
        assert_eq!(d.total.verdict, "too few runs to test (n = 1 vs 1): B equals A");
        let labels: Vec<&str> = d.hosts.iter().map(|h| h.label.as_str()).collect();
        assert_eq!(labels, ["vm1", "vm2"], "A's order");
        assert_eq!(d.hosts[0].result.change_percent, Some(-50.0));
        assert!(!d.hosts[0].result.significant, "one value a side is never significant");
        let un: Vec<(&str, &str, &str)> = d
            .unmatched
            .iter()
            .map(|u| (u.label.as_str(), u.measured_in, u.other_side.as_str()))
            .collect();
        assert_eq!(
            un,
            [("vm3", "A", "B did not measure it: refused"), ("vm4", "B", "A has no host \"vm4\""),]
        );
        assert_eq!(d.across_hosts.jain.a, Some(1.0));
        let jb = d.across_hosts.jain.b.expect("jain");
        assert!((jb - 9e16 / (3.0 * 3.5e16)).abs() < 1e-12, "{jb}");
        assert_eq!(d.across_hosts.jain.change, Some(jb - 1.0));
        assert_eq!(d.across_hosts.cv.a, Some(0.0));
        assert!(c.only_in.is_empty());
    }

    #[test]
    fn a_direction_only_one_side_ran_is_listed() {
        let a = fleet(&[("vm1", 1e6)], &[]);
        let mut b = a.clone();
        b.directions[0].flow = Flow::ServerToClient;
        let c = compare_fleets(&a, &b, 0.05);
        assert!(c.directions.is_empty());
        assert_eq!(c.only_in, [(Flow::ClientToServer, "A"), (Flow::ServerToClient, "B")]);
    }

    #[test]
    fn curves_are_tested_per_host_count_with_their_repetitions() {
        let runs = |scale: f64, ks: &[usize]| -> Vec<(usize, FleetSummary)> {
            ks.iter()
                .flat_map(|&k| {
                    [0.99, 1.0, 1.01].map(|x| {
                        let per = 100e6 * scale * x;
                        let hosts: Vec<(String, f64)> =
                            (0..k).map(|i| (format!("h{i}"), per)).collect();
                        let hosts: Vec<(&str, f64)> =
                            hosts.iter().map(|(l, b)| (l.as_str(), *b)).collect();
                        (k, fleet(&hosts, &[]))
                    })
                })
                .collect()
        };
        let a = summarize_scaling(&runs(1.0, &[1, 2, 4]));
        let b = summarize_scaling(&runs(1.2, &[1, 2, 8]));
        let c = compare_curves(&a, &b, 0.05);
        let d = &c.directions[0];
        let ks: Vec<(usize, Option<&str>)> =
            d.points.iter().map(|p| (p.hosts, p.only_in)).collect();
        assert_eq!(ks, [(1, None), (2, None), (4, Some("A")), (8, Some("B"))]);
        let p2 = &d.points[1];
        assert_eq!((p2.result.n_a, p2.result.n_b, p2.result.test), (3, 3, "welch_t"));
        assert!(p2.result.significant, "{}", p2.result.verdict);
        assert!(
            p2.result.verdict.starts_with("B is 20.0 % higher than A"),
            "{}",
            p2.result.verdict
        );
        let (lo, hi) = p2.ci95_a.expect("interval");
        assert!(lo < 200e6 && 200e6 < hi);
        assert_eq!(d.points[2].result.verdict, "not compared: only A ran 4 hosts (B did not)");
        assert!(!d.points[3].result.significant);
        assert_eq!(d.stops_rising_a, (Some(4), true));
    }
}
