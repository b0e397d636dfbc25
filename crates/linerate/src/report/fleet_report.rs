//! A stored fleet or scaling curve as `linerate report fN` shows it in every format: the model
//! the formats read (the facts, each fleet run with its hosts and figures, the curve), and its
//! text and Markdown. HTML is `fleet_html`, CSV `csv::write_fleet`, JSON `fleet`.
//!
//! Pure: the figures come from `stats::fleet` and `stats::scaling` (the caller summarizes each
//! fleet run once, as the live command does); loading from the history is `cmd`'s job.

use std::io::Write;

use crate::record::{Outcome, RunRecord};
use crate::report::document::{Style, write_head};
use crate::report::fleet::{write_fleet_body, write_scale_body};
use crate::report::history::utc;
use crate::report::text::describe_spec;
use crate::stats::fleet::{FleetSummary, HostFigures, Spread};
use crate::stats::scaling::{ScaleSummary, summarize_scaling};

/// One host's run in a fleet run.
#[derive(Debug, Clone, PartialEq)]
pub struct HostRun {
    /// Its label in the fleet.
    pub label: String,
    /// Its id in the history.
    pub id: Option<i64>,
    /// The run.
    pub record: RunRecord,
}

/// One fleet run: its hosts and their figures.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetRun {
    /// Hosts it ran with (the curve's k).
    pub hosts_in_run: usize,
    /// Its repetition (1 for a single fleet).
    pub repetition: u32,
    /// Each host's run, in the order of the targets.
    pub hosts: Vec<HostRun>,
    /// Its figures.
    pub summary: FleetSummary,
}

/// A stored fleet (one fleet run) or scaling curve (many), ready for any format.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetReport {
    /// Its history group.
    pub group: i64,
    /// Whether every planned run completed.
    pub finished: bool,
    /// The curve's order seed.
    pub seed: Option<u64>,
    /// The fleet runs: one for a fleet; for a curve in the order they ran.
    pub runs: Vec<FleetRun>,
    /// The scaling curve, for `--scale`.
    pub curve: Option<ScaleSummary>,
}

impl FleetReport {
    /// A single fleet.
    pub fn fleet(group: i64, finished: bool, run: FleetRun) -> FleetReport {
        FleetReport { group, finished, seed: None, runs: vec![run], curve: None }
    }

    /// A scaling curve from its fleet runs, in the order they ran.
    pub fn curve(group: i64, finished: bool, seed: Option<u64>, runs: Vec<FleetRun>) -> Self {
        let fleets: Vec<(usize, FleetSummary)> =
            runs.iter().map(|r| (r.hosts_in_run, r.summary.clone())).collect();
        let curve = Some(summarize_scaling(&fleets));
        FleetReport { group, finished, seed, runs, curve }
    }

    /// How the user names it: `fleet f3`, `scaling curve f4`.
    pub fn title(&self) -> String {
        let what = if self.curve.is_some() { "scaling curve" } else { "fleet" };
        format!("{what} f{}", self.group)
    }

    /// Every host run, with its fleet run.
    fn host_runs(&self) -> impl Iterator<Item = &HostRun> {
        self.runs.iter().flat_map(|r| &r.hosts)
    }

    /// The targets, in their order: those of the largest fleet run (a curve's k-th run has the
    /// first k).
    fn targets(&self) -> Vec<&HostRun> {
        self.runs
            .iter()
            .max_by_key(|r| r.hosts.len())
            .map_or(Vec::new(), |r| r.hosts.iter().collect())
    }

    /// UTC date and time of the first host run.
    pub fn date(&self) -> Option<String> {
        self.host_runs().map(|h| h.record.started_unix_ms).min().map(utc)
    }

    /// The targets in words: `a (127.0.0.1:5201, linerate 0.1.0), b (…)`.
    pub fn hosts(&self) -> String {
        let hosts: Vec<String> = self
            .targets()
            .iter()
            .map(|h| {
                let software =
                    h.record.server_software.as_deref().unwrap_or("server software unknown");
                format!("{} ({}, {software})", h.label, h.record.server)
            })
            .collect();
        if hosts.is_empty() { "n/a (no host runs stored)".into() } else { hosts.join(", ") }
    }

    /// The test every host ran, in words.
    pub fn settings(&self) -> String {
        self.host_runs()
            .next()
            .map_or("n/a (no host runs stored)".into(), |h| describe_spec(&h.record.spec))
    }

    /// The facts a report opens with.
    pub fn facts(&self) -> Vec<(&'static str, String)> {
        let mut facts = vec![
            ("Date (UTC)", self.date().unwrap_or_else(|| "n/a (no host runs stored)".into())),
            ("Hosts", self.hosts()),
            ("Settings", self.settings()),
        ];
        let done = if self.finished { "yes" } else { "no: see the warnings" };
        match (&self.curve, self.runs.first()) {
            (Some(_), _) => {
                let mut counts: Vec<usize> = self.runs.iter().map(|r| r.hosts_in_run).collect();
                counts.sort_unstable();
                counts.dedup();
                let counts: Vec<String> = counts.iter().map(usize::to_string).collect();
                facts.push(("Host counts", counts.join(", ")));
                if let Some(seed) = self.seed {
                    facts.push(("Order seed", seed.to_string()));
                }
                let partial = self.runs.iter().filter(|r| partial(&r.summary)).count();
                facts.push((
                    "Fleet runs",
                    format!(
                        "{} stored, {partial} partial (every planned run completed: {done})",
                        self.runs.len()
                    ),
                ));
            }
            (None, Some(run)) => {
                let s = &run.summary;
                facts.push((
                    "Measured",
                    format!(
                        "{} of {} hosts{}",
                        s.hosts_measured,
                        s.hosts_planned,
                        if partial(s) { " (the others: see Not measured)" } else { "" }
                    ),
                ));
            }
            (None, None) => facts.push(("Measured", "n/a (no host runs stored)".into())),
        }
        facts
    }

    /// The context lines under a chart's title: when and where, then how.
    pub fn context(&self) -> Vec<String> {
        let date = self.date().map_or("no date".into(), |d| format!("{d} UTC"));
        vec![format!("{date} · {}", self.hosts()), self.settings()]
    }

    /// What the reader must know: for a curve, each partial fleet run's hosts that were not
    /// measured and why (a single fleet lists them in its own section).
    pub fn warnings(&self) -> Vec<String> {
        if self.curve.is_none() {
            return Vec::new();
        }
        self.runs
            .iter()
            .flat_map(|r| {
                r.summary.not_measured.iter().map(move |(label, why)| {
                    format!(
                        "{} hosts, run {}: {label} not measured ({why}); the run is left out of \
                         its point",
                        r.hosts_in_run, r.repetition
                    )
                })
            })
            .collect()
    }
}

/// True when a fleet run did not measure every host.
fn partial(s: &FleetSummary) -> bool {
    s.hosts_measured < s.hosts_planned
}

/// The spread of a host's own flows (mean, σ, min–max, CV, Jain); None without flows.
pub fn flow_spread(h: &HostFigures) -> Option<Spread> {
    Spread::of(&h.flows)
}

/// How a host's outcome is written: `completed`, `interrupted`, `failed`.
pub fn outcome_word(record: &RunRecord) -> &'static str {
    match record.outcome {
        Outcome::Completed => "completed",
        Outcome::Interrupted => "interrupted",
        Outcome::Failed { .. } => "failed",
    }
}

/// The report in text or Markdown: the facts, then the fleet's sections or the curve's.
pub fn write_document(style: Style, r: &FleetReport, out: &mut dyn Write) -> std::io::Result<()> {
    write_head(style, &r.title(), &r.facts(), out)?;
    match (&r.curve, r.runs.first()) {
        (Some(curve), _) => write_scale_body(style, curve, out)?,
        (None, Some(run)) => {
            writeln!(out)?;
            write_fleet_body(style, &run.summary, None, out)?;
        }
        (None, None) => {}
    }
    let warnings = r.warnings();
    if !warnings.is_empty() {
        writeln!(out)?;
        style.list("Warnings", &warnings, out)?;
    }
    Ok(())
}
