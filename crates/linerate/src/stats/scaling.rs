//! A fleet's scaling curve (`linerate fleet --scale`): the total per direction against the
//! number of hosts, each host count run `--repeat` times, and the point where the total stops
//! rising — the VMware paper's Figures 4 and 5.
//!
//! **Where the total stops rising:** the smallest host count whose mean total is within
//! [`PLATEAU`] of the highest mean total of the curve. When that is the largest count run,
//! the curve may still be rising and the finding says so rather than naming a plateau.
//!
//! Pure; no I/O.

use linerate_proto::Flow;
use serde::Serialize;

use crate::stats::fleet::FleetSummary;
use crate::stats::sample::{SampleStats, ci_within, describe};

/// How close to the highest mean total a host count must come to count as the plateau.
pub const PLATEAU: f64 = 0.05;

/// One host count of the curve, in one direction.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScalePoint {
    /// Hosts in the fleet.
    pub hosts: usize,
    /// The total of each completed repetition, bit/s.
    pub totals: Vec<f64>,
    /// Their statistics (None: no repetition measured every host).
    pub total: Option<SampleStats>,
    /// Mean per-host rate over the repetitions, bit/s.
    pub per_host_mean: Option<f64>,
    /// Mean Jain's index across hosts over the repetitions (None with one host).
    pub jain_mean: Option<f64>,
    /// Repetitions left out because a host was not measured.
    pub partial_runs: usize,
    /// Of the repetitions in `totals`, those in which a host's own run says its CPU, not the
    /// path, set its rate ([`cpu_contended`]): the point holds them, and says so.
    pub contended_runs: usize,
}

/// Whether a host's verdict id says the CPU set its rate — its threads starved for a CPU, or
/// other processes kept its host busy (`starved(…)`, `foreign_load(…)`): such a run measured
/// the host's share of a CPU, not the fleet's path.
pub fn cpu_contended(limit: &str) -> bool {
    limit.starts_with("starved") || limit.starts_with("foreign_load")
}

/// The curve of one direction.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScaleDirection {
    /// Which way.
    pub flow: Flow,
    /// One point per host count, ascending.
    pub points: Vec<ScalePoint>,
    /// The smallest host count within [`PLATEAU`] of the highest mean total.
    pub stops_rising_at: Option<usize>,
    /// True when that is the largest host count run: the total may still be rising.
    pub still_rising: bool,
    /// The theoretical TCP goodput of the link the user named, if one was.
    pub link_goodput_bits_per_second: Option<f64>,
}

/// The scaling curve of every direction.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScaleSummary {
    /// One per direction of the test.
    pub directions: Vec<ScaleDirection>,
}

/// The curve from every fleet run: (host count, its summary).
pub fn summarize_scaling(runs: &[(usize, FleetSummary)]) -> ScaleSummary {
    let mut counts: Vec<usize> = runs.iter().map(|(k, _)| *k).collect();
    counts.sort_unstable();
    counts.dedup();
    let mut flows: Vec<Flow> =
        runs.iter().flat_map(|(_, s)| s.directions.iter().map(|d| d.flow)).collect();
    flows.sort_by_key(|f| matches!(f, Flow::ServerToClient));
    flows.dedup();
    let directions = flows
        .into_iter()
        .map(|flow| {
            let points: Vec<ScalePoint> = counts.iter().map(|&k| point(flow, k, runs)).collect();
            let (stops_rising_at, still_rising) = plateau(&points);
            let link_goodput_bits_per_second = runs
                .iter()
                .flat_map(|(_, s)| &s.directions)
                .find_map(|d| d.link_goodput_bits_per_second);
            ScaleDirection {
                flow,
                points,
                stops_rising_at,
                still_rising,
                link_goodput_bits_per_second,
            }
        })
        .collect();
    ScaleSummary { directions }
}

fn point(flow: Flow, k: usize, runs: &[(usize, FleetSummary)]) -> ScalePoint {
    let of_k: Vec<&FleetSummary> = runs.iter().filter(|(n, _)| *n == k).map(|(_, s)| s).collect();
    // Only repetitions where every host was measured: a partial fleet is a smaller fleet.
    let whole: Vec<&FleetSummary> =
        of_k.iter().copied().filter(|s| s.hosts_measured == s.hosts_planned).collect();
    let dirs: Vec<_> =
        whole.iter().filter_map(|s| s.directions.iter().find(|d| d.flow == flow)).collect();
    let totals: Vec<f64> = dirs.iter().map(|d| d.total_bits_per_second).collect();
    let contended_runs = dirs
        .iter()
        .filter(|d| d.hosts.iter().any(|h| h.limit.as_deref().is_some_and(cpu_contended)))
        .count();
    let mean = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
    let per_host: Vec<f64> =
        dirs.iter().filter_map(|d| Some(d.across_hosts.as_ref()?.mean)).collect();
    let jains: Vec<f64> = dirs.iter().filter_map(|d| d.across_hosts.as_ref()?.jain).collect();
    ScalePoint {
        hosts: k,
        total: describe(&totals),
        totals,
        per_host_mean: mean(&per_host),
        jain_mean: mean(&jains),
        partial_runs: of_k.len() - whole.len(),
        contended_runs,
    }
}

/// With `--until-ci`: the host counts of `counts` that need another round. A count is done
/// when the 95 % interval of its total is within `target` (a fraction of the mean) in every
/// direction, or when it has `max_repeat` whole runs; only whole runs (every host measured)
/// count, as in every figure of the curve. So that a count whose runs keep going partial
/// cannot go on for ever, it also stops after `max_attempts` attempts per run it may have.
pub fn pending_counts(
    runs: &[(usize, FleetSummary)],
    counts: &[usize],
    target: f64,
    (max_repeat, max_attempts): (usize, usize),
) -> Vec<usize> {
    let curve = summarize_scaling(runs);
    let needs_more = |k: usize| {
        let attempts = runs.iter().filter(|(n, _)| *n == k).count();
        let points: Vec<&ScalePoint> = curve
            .directions
            .iter()
            .filter_map(|d| d.points.iter().find(|p| p.hosts == k))
            .collect();
        let whole = points.iter().map(|p| p.totals.len()).min().unwrap_or(0);
        let met = !points.is_empty()
            && points.iter().all(|p| p.total.as_ref().is_some_and(|s| ci_within(s, target)));
        !met && whole < max_repeat && attempts < max_repeat * max_attempts
    };
    counts.iter().copied().filter(|&k| needs_more(k)).collect()
}

/// The smallest host count within [`PLATEAU`] of the highest mean, and whether it is the last.
fn plateau(points: &[ScalePoint]) -> (Option<usize>, bool) {
    let means: Vec<(usize, f64)> =
        points.iter().filter_map(|p| Some((p.hosts, p.total.as_ref()?.mean))).collect();
    let Some(best) = means.iter().map(|(_, m)| *m).reduce(f64::max) else { return (None, false) };
    if means.len() < 2 || best <= 0.0 {
        return (None, false);
    }
    let at = means.iter().find(|(_, m)| *m >= best * (1.0 - PLATEAU)).map(|(k, _)| *k);
    let last = means.last().map(|(k, _)| *k);
    (at, at.is_some() && at == last)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fleet(hosts: usize, total: f64) -> FleetSummary {
        FleetSummary::even_for_tests(Flow::ServerToClient, hosts, total)
    }

    #[test]
    fn a_curve_that_rises_then_holds_names_where_it_stops() {
        // 200 Mbit/s per host through a 956 Mbit/s link: rises to 4, holds from 8.
        let runs: Vec<(usize, FleetSummary)> = [1, 2, 4, 8, 16]
            .iter()
            .flat_map(|&k| {
                let t = (200e6 * k as f64).min(956e6);
                [(k, fleet(k, t * 0.99)), (k, fleet(k, t * 1.01))]
            })
            .collect();
        let s = summarize_scaling(&runs);
        let d = &s.directions[0];
        assert_eq!(d.points.iter().map(|p| p.hosts).collect::<Vec<_>>(), [1, 2, 4, 8, 16]);
        assert!(d.points.iter().all(|p| p.totals.len() == 2 && p.partial_runs == 0));
        assert_eq!((d.stops_rising_at, d.still_rising), (Some(8), false));
        let p4 = &d.points[2];
        assert!((p4.total.as_ref().expect("stats").mean - 800e6).abs() < 1e3);
        assert!((p4.per_host_mean.expect("mean") - 200e6).abs() < 1e3);
        assert_eq!(p4.jain_mean, Some(1.0));
    }

    #[test]
    fn a_curve_still_rising_says_so_and_partial_fleets_are_left_out() {
        let mut partial = fleet(4, 100e6);
        partial.hosts_measured = 3;
        let runs =
            vec![(1, fleet(1, 100e6)), (2, fleet(2, 200e6)), (4, fleet(4, 400e6)), (4, partial)];
        let d = &summarize_scaling(&runs).directions[0];
        assert_eq!((d.stops_rising_at, d.still_rising), (Some(4), true));
        assert_eq!(d.points[2].totals, vec![400e6]);
        assert_eq!(d.points[2].partial_runs, 1);
    }

    #[test]
    fn until_ci_asks_for_counts_whose_interval_is_wide_until_their_bounds() {
        let mut partial = fleet(4, 100e6);
        partial.hosts_measured = 3;
        let runs = vec![
            (1, fleet(1, 100e6)),
            (1, fleet(1, 100.1e6)),
            (2, fleet(2, 150e6)),
            (2, fleet(2, 250e6)),
            (4, fleet(4, 400e6)),
            (4, partial),
        ];
        // 1: interval within 5 %; 2: wide; 4: one whole run, no interval yet; 8: never ran.
        let counts = [1, 2, 4, 8];
        assert_eq!(pending_counts(&runs, &counts, 0.05, (10, 2)), [2, 4, 8]);
        assert_eq!(pending_counts(&runs, &counts, 0.05, (2, 2)), [4, 8], "2 has its 2 runs");
        assert_eq!(pending_counts(&runs, &counts, 0.05, (2, 1)), [8], "4 made its 2 attempts");
    }
}
