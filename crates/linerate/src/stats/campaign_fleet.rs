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

/// One fleet run of the tier.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FleetTierRun {
    /// Hosts in it.
    pub hosts: usize,
    /// Its repetition.
    pub repetition: u32,
    /// Attempts stored for it (more than 1 after a resume ran it again).
    pub attempts: usize,
    /// Its figures.
    pub summary: FleetSummary,
}

/// A fleet tier's figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FleetTierFigures {
    /// Targets in the fleet.
    pub targets: usize,
    /// The scaling curve's host counts; empty: every target together.
    pub scale: Vec<usize>,
    /// Every fleet run, by host count then repetition.
    pub runs: Vec<FleetTierRun>,
    /// The totals per host count (one point without a scale), and where they stop rising.
    pub curve: ScaleSummary,
}

impl FleetTierFigures {
    /// The targets and host counts these figures are of.
    pub fn shape(&self) -> FleetShape {
        FleetShape { targets: self.targets, scale: self.scale.clone() }
    }
}

/// One attempt at a fleet run: its host runs, in stored order.
#[derive(Debug)]
pub struct Attempt<'a> {
    /// Index of its host count.
    pub index: usize,
    /// Its repetition.
    pub repetition: u32,
    /// Its host runs (with their place in `runs`).
    pub records: Vec<(usize, &'a RunRecord)>,
}

impl Attempt<'_> {
    /// True when every one of `hosts` hosts completed.
    fn whole(&self, hosts: usize) -> bool {
        self.records.len() == hosts
            && self.records.iter().all(|(_, r)| r.outcome == Outcome::Completed)
    }
}

fn label(r: &RunRecord) -> &str {
    HostInput::placed(r).label
}

/// The attempts in `runs` (host-count index, repetition, record), in stored order, by the one
/// rule ([`crate::stats::fleet::split_attempts`]); `counts` are the tier's host counts.
pub fn attempts<'a>(runs: &'a [(usize, u32, RunRecord)], counts: &[usize]) -> Vec<Attempt<'a>> {
    let of = runs.iter().map(|(index, repetition, record)| {
        ((*index, *repetition), counts.get(*index).copied().unwrap_or(0), label(record))
    });
    let mut out: Vec<Attempt<'a>> = Vec::new();
    for (at, (n, (index, repetition, record))) in
        split_attempts(of).into_iter().zip(runs).enumerate()
    {
        if n == out.len() {
            out.push(Attempt { index: *index, repetition: *repetition, records: Vec::new() });
        }
        out[n].records.push((at, record));
    }
    out
}

/// The host runs of the fleet runs that are done (every host measured: not run again on
/// resume), the first such attempt of each.
pub fn completed_fleet_runs(
    shape: &FleetShape,
    runs: &[(usize, u32, RunRecord)],
) -> Vec<(usize, u32, RunRecord)> {
    let counts = shape.counts();
    let mut out: Vec<(usize, u32, RunRecord)> = Vec::new();
    for a in attempts(runs, &counts) {
        let hosts = counts.get(a.index).copied().unwrap_or(0);
        let already = out.iter().any(|(i, r, _)| (*i, *r) == (a.index, a.repetition));
        if a.whole(hosts) && !already {
            out.extend(a.records.iter().map(|(_, r)| (a.index, a.repetition, (*r).clone())));
        }
    }
    out
}

/// The figures of a fleet tier from its stored runs.
pub fn fleet_figures(shape: &FleetShape, runs: &[(usize, u32, RunRecord)]) -> FleetTierFigures {
    let counts = shape.counts();
    let all = attempts(runs, &counts);
    let mut chosen: Vec<FleetTierRun> = Vec::new();
    let mut keys: Vec<(usize, u32)> = all.iter().map(|a| (a.index, a.repetition)).collect();
    keys.sort_unstable();
    keys.dedup();
    for (index, repetition) in keys {
        let hosts = counts.get(index).copied().unwrap_or(0);
        let of: Vec<&Attempt<'_>> =
            all.iter().filter(|a| (a.index, a.repetition) == (index, repetition)).collect();
        let Some(pick) = of.iter().find(|a| a.whole(hosts)).or(of.last()) else { continue };
        let inputs: Vec<HostInput<'_>> =
            pick.records.iter().map(|(_, r)| HostInput::placed(r)).collect();
        let summary = summarize_planned(hosts, &inputs);
        chosen.push(FleetTierRun { hosts, repetition, attempts: of.len(), summary });
    }
    let curve =
        summarize_scaling(&chosen.iter().map(|r| (r.hosts, r.summary.clone())).collect::<Vec<_>>());
    FleetTierFigures { targets: shape.targets, scale: shape.scale.clone(), runs: chosen, curve }
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
    let kept: usize = figures.runs.iter().map(|r| r.summary.hosts_measured).sum();
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
        let runs = f.runs.iter().filter(|r| r.hosts == top.hosts && !f.scale.is_empty());
        for r in runs {
            let dir = r.summary.directions.iter().find(|x| x.flow == d.flow);
            for o in dir.map(|x| &x.outliers[..]).unwrap_or_default() {
                let more = if o.against_median_percent < 0.0 { "less" } else { "more" };
                out.push(format!(
                    "data {flow}, run {}: {} got {:.0}% {more} than the median host{}",
                    r.repetition,
                    o.label,
                    o.against_median_percent.abs(),
                    o.limit_summary.as_deref().map_or(String::new(), |w| format!(": {w}"))
                ));
            }
        }
    }
    out
}

#[cfg(test)]
#[path = "campaign_fleet_tests.rs"]
mod tests;
