//! A campaign's fleet tier summarised: each fleet run's figures (`stats::fleet`: totals per
//! direction, per-host shares, σ, Jain, outliers), the curve over its host counts
//! (`stats::scaling`), and the tier's line in the cross-tier table (its best total against
//! the stated link's TCP goodput).
//!
//! **Attempts.** A fleet run is stored as one run per host, all under the same host count and
//! repetition. A resumed campaign runs a fleet run again when an earlier attempt did not
//! measure every host, so a (host count, repetition) may hold several attempts, told apart by
//! the one rule of `stats::fleet::split_attempts` (resume and reports alike). The first
//! attempt that measured every host is the one that counts (a resume keeps it), else the last
//! one; earlier attempts count only as failed runs.
//!
//! Pure functions over records.

use linerate_proto::Flow;
use serde::Serialize;

use crate::plan::campaign::TierFleet;
use crate::record::{Outcome, RunRecord};
use crate::stats::campaign::{TierPlace, TierSummary};
use crate::stats::fleet::{FleetSummary, HostInput, split_attempts, summarize_planned};
use crate::stats::matrix::MatrixSummary;
use crate::stats::scaling::{ScaleSummary, summarize_scaling};
use crate::stats::verdict::tcp_goodput_bits_per_second;
use crate::units::{count_of, format_bits_per_second};

/// What a fleet tier ran: its targets and host counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct FleetShape {
    /// Targets in the fleet.
    pub targets: usize,
    /// The scaling curve's host counts; empty: every target together.
    pub scale: Vec<usize>,
}

impl FleetShape {
    /// The shape of a tier's fleet.
    pub fn of(f: &TierFleet) -> Self {
        Self { targets: f.targets.len(), scale: f.scale.clone() }
    }

    /// The host counts run, by index (the stored runs' cell index).
    pub fn counts(&self) -> Vec<usize> {
        if self.scale.is_empty() { vec![self.targets] } else { self.scale.clone() }
    }
}

/// One fleet run: one attempt at one (host count, repetition). The one fleet run type of a
/// fleet, a scaling curve and a campaign's fleet tier, live and stored alike.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FleetRun {
    /// Hosts in it.
    pub hosts: usize,
    /// Its repetition.
    pub repetition: u32,
    /// Which attempt at its (host count, repetition) it is, from 1.
    pub attempt: usize,
    /// Attempts stored for its (host count, repetition) (more than 1 after a resume ran it
    /// again).
    pub attempts: usize,
    /// Whether it is the attempt that counts for its (host count, repetition): the first that
    /// measured every host (a resume keeps it), else the last one.
    pub counts: bool,
    /// Its host runs: their places in the runs the figures were made from, in stored order.
    #[serde(skip)]
    pub records: Vec<usize>,
    /// Its figures.
    pub summary: FleetSummary,
}

impl FleetRun {
    /// True when every host it planned was measured.
    pub fn whole(&self) -> bool {
        self.summary.hosts_measured == self.summary.hosts_planned
    }
}

/// A fleet tier's figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FleetTierFigures {
    /// Targets in the fleet.
    pub targets: usize,
    /// The scaling curve's host counts; empty: every target together.
    pub scale: Vec<usize>,
    /// Every fleet run (every attempt), in the order they were stored.
    pub runs: Vec<FleetRun>,
    /// The totals per host count (one point without a scale), and where they stop rising:
    /// partial runs are counted as such at their point, never in its totals.
    pub curve: ScaleSummary,
}

impl FleetTierFigures {
    /// The targets and host counts these figures are of.
    pub fn shape(&self) -> FleetShape {
        FleetShape { targets: self.targets, scale: self.scale.clone() }
    }

    /// The fleet runs that count, one per (host count, repetition), in stored order.
    pub fn counted(&self) -> impl Iterator<Item = &FleetRun> {
        self.runs.iter().filter(|r| r.counts)
    }
}

/// Every fleet run (attempt) in `runs` (host-count index, repetition, record), in stored
/// order, by the one rule ([`crate::stats::fleet::split_attempts`]), with its figures;
/// `shape` gives the host counts.
pub fn fleet_runs(shape: &FleetShape, runs: &[(usize, u32, RunRecord)]) -> Vec<FleetRun> {
    let counts = shape.counts();
    let planned = |index: usize| counts.get(index).copied().unwrap_or(0);
    let of = runs
        .iter()
        .map(|(at, repetition, r)| ((*at, *repetition), planned(*at), HostInput::placed(r).label));
    let mut out: Vec<(usize, FleetRun)> = Vec::new();
    for (at, (n, (index, repetition, _))) in split_attempts(of).into_iter().zip(runs).enumerate() {
        if n == out.len() {
            let run = FleetRun {
                hosts: planned(*index),
                repetition: *repetition,
                attempt: 1,
                attempts: 1,
                counts: false,
                records: Vec::new(),
                summary: summarize_planned(0, &[]),
            };
            out.push((*index, run));
        }
        out[n].1.records.push(at);
    }
    for (_, run) in &mut out {
        let inputs: Vec<HostInput<'_>> =
            run.records.iter().map(|&i| HostInput::placed(&runs[i].2)).collect();
        run.summary = summarize_planned(run.hosts, &inputs);
    }
    // Number the attempts of each key, and mark the one that counts.
    for i in 0..out.len() {
        let key = |j: usize| (out[j].0, out[j].1.repetition);
        let same: Vec<usize> = (0..out.len()).filter(|&j| key(j) == key(i)).collect();
        let pick = same.iter().copied().find(|&j| out[j].1.whole()).or(same.last().copied());
        let run = &mut out[i].1;
        run.attempt = 1 + same.iter().position(|&j| j == i).unwrap_or(0);
        run.attempts = same.len();
        run.counts = pick == Some(i);
    }
    out.into_iter().map(|(_, r)| r).collect()
}

/// The host runs of the fleet runs that are done (every host measured: not run again on
/// resume), the first such attempt of each.
pub fn completed_fleet_runs(
    shape: &FleetShape,
    runs: &[(usize, u32, RunRecord)],
) -> Vec<(usize, u32, RunRecord)> {
    let kept = fleet_runs(shape, runs).into_iter().filter(|r| r.counts && r.whole());
    kept.flat_map(|r| r.records).map(|i| runs[i].clone()).collect()
}

/// The figures of a fleet tier from its stored runs.
pub fn fleet_figures(shape: &FleetShape, runs: &[(usize, u32, RunRecord)]) -> FleetTierFigures {
    let runs = fleet_runs(shape, runs);
    let curve =
        summarize_scaling(&runs.iter().map(|r| (r.hosts, r.summary.clone())).collect::<Vec<_>>());
    FleetTierFigures { targets: shape.targets, scale: shape.scale.clone(), runs, curve }
}

/// [`crate::stats::campaign::summarize_place`] for a fleet tier: its fleet figures, its best
/// mean total as the tier's best "cell", and its findings.
pub fn summarize_fleet_place(
    place: TierPlace,
    ipv6: bool,
    shape: &FleetShape,
    runs: &[(usize, u32, RunRecord)],
    stopped: Option<&str>,
) -> TierSummary {
    let figures = fleet_figures(shape, runs);
    let best = figures
        .curve
        .directions
        .iter()
        .flat_map(|d| {
            d.points.iter().filter_map(move |p| Some((d.flow, p.hosts, p.total.as_ref()?.mean)))
        })
        .max_by(|a, b| a.2.total_cmp(&b.2));
    let goodput = place.link.and_then(|l| tcp_goodput_bits_per_second(&l, ipv6));
    let best_rate = best.map(|(_, _, r)| r);
    let kept: usize = figures.counted().map(|r| r.summary.hosts_measured).sum();
    TierSummary {
        name: place.name,
        server: place.server,
        link: place.link,
        best_cell: best.map(|(flow, k, _)| format!("{}, {}", hosts(k), flow_words(flow))),
        best_bits_per_second: best_rate,
        link_goodput_bits_per_second: goodput,
        share_of_link_goodput: best_rate.zip(goodput).map(|(r, g)| r / g),
        runs: kept,
        failed: runs.iter().filter(|(_, _, r)| r.outcome != Outcome::Completed).count(),
        stopped: stopped.map(String::from),
        summary: MatrixSummary { cells: Vec::new(), findings: findings(&figures) },
        fleet: Some(figures),
    }
}

fn hosts(k: usize) -> String {
    count_of(k as u64, "host")
}

fn flow_words(flow: Flow) -> &'static str {
    match flow {
        Flow::ClientToServer => "to the hosts",
        Flow::ServerToClient => "from the hosts",
    }
}

/// The tier's findings: where the total stops rising (a curve), the total, per-host mean and
/// fairness at the most hosts run, and every outlier named there.
fn findings(f: &FleetTierFigures) -> Vec<String> {
    let mut out = Vec::new();
    for d in &f.curve.directions {
        let flow = flow_words(d.flow);
        if !f.scale.is_empty() {
            let at = d.stops_rising_at.and_then(|k| d.points.iter().find(|p| p.hosts == k));
            let mean = at.and_then(|p| Some(format_bits_per_second(p.total.as_ref()?.mean)));
            match (at, mean, d.still_rising) {
                (Some(p), Some(m), false) => out.push(format!(
                    "data {flow}: the total stops rising at {} ({m} mean)",
                    hosts(p.hosts)
                )),
                (Some(p), Some(m), true) => out.push(format!(
                    "data {flow}: the total is highest at the most hosts run ({}, {m} mean): it \
                     may still be rising",
                    hosts(p.hosts)
                )),
                _ => {}
            }
        }
        let Some(top) = d.points.iter().rev().find(|p| p.total.is_some()) else { continue };
        let total = top.total.as_ref().map_or(0.0, |s| s.mean);
        let per_host = top.per_host_mean.map_or("n/a".into(), format_bits_per_second);
        let jain = top.jain_mean.map_or("n/a".into(), |j| format!("{j:.3}"));
        out.push(format!(
            "data {flow} at {}: total {} (mean of {} run(s)), per host {per_host}, Jain {jain}",
            hosts(top.hosts),
            format_bits_per_second(total),
            top.totals.len()
        ));
        // A curve's text is its table: name the outliers at its top here. Without a scale,
        // each run's text names its own.
        let runs = f.counted().filter(|r| r.hosts == top.hosts && !f.scale.is_empty());
        for r in runs {
            let dir = r.summary.directions.iter().find(|x| x.flow == d.flow);
            for o in dir.map(|x| &x.outliers[..]).unwrap_or_default() {
                let more = if o.against_median_percent < 0.0 { "less" } else { "more" };
                out.push(format!(
                    "data {flow}, run {}: {} got {:.0}% {more} than the median host: {}",
                    r.repetition,
                    o.label,
                    o.against_median_percent.abs(),
                    o.reason
                ));
            }
        }
    }
    out
}

#[cfg(test)]
#[path = "campaign_fleet_tests.rs"]
mod tests;
