//! The report model: everything `linerate report` shows, computed once from runs, before any
//! format is chosen. Text, Markdown, CSV, JSON and HTML all read this model, so one number
//! cannot differ between two formats.
//!
//! A report is tiers of cells: a campaign has its tiers, a matrix is one tier, a single run is
//! one tier with one cell. Each tier is summarised by `stats::campaign::summarize_place` (the
//! same code the live `matrix` and `campaign` commands use), and every stream's intervals are
//! kept as time series for the CSV rows and the charts.
//!
//! Pure: no I/O, no clock. Loading runs from the history or a file is `crate::cmd`'s
//! job; writing is the renderers'.

use linerate_proto::{Flow, StreamRole};
use serde::Serialize;

use crate::plan::matrix::{AxisValue, Cell};
use crate::record::{Outcome, RunRecord};
use crate::report::words::{describe_spec, describe_spec_without};
use crate::stats::campaign::{TierPlace, TierSummary, cross_tier_findings, summarize_place};
use crate::stats::campaign_fleet::{FleetRun, FleetShape, FleetTierFigures, summarize_fleet_place};
use crate::stats::scaling::cpu_contended;
use crate::stats::{Summary, summarize};
use crate::units::utc;

/// What the report is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReportKind {
    /// One run.
    Run,
    /// One matrix (or a `--find-max` search: one cell per trial).
    Matrix,
    /// Tiers of matrices.
    Campaign,
    /// A fleet or a fleet's scaling curve: one fleet tier.
    Fleet,
}

/// One run as it enters a report.
#[derive(Debug, Clone, PartialEq)]
pub struct InputRun {
    /// Index of its cell in the tier.
    pub cell: usize,
    /// Repetition of the cell (1-based).
    pub repetition: u32,
    /// Its id in the history, when it came from there.
    pub id: Option<i64>,
    /// The raw record.
    pub record: RunRecord,
}

/// One tier as it enters a report.
#[derive(Debug, Clone, PartialEq)]
pub struct TierInput {
    /// Name, server, stated link.
    pub place: TierPlace,
    /// Whether the server address is IPv6 (for the link's goodput).
    pub ipv6: bool,
    /// The cells, in matrix order.
    pub cells: Vec<Cell>,
    /// The `--until-ci` target, if the matrix had one.
    pub until_ci: Option<f64>,
    /// Why the tier stopped early, if it did.
    pub stopped: Option<String>,
    /// Its runs (a fleet tier: cell = the host count's index, every host's run).
    pub runs: Vec<InputRun>,
    /// A campaign's fleet tier: its targets and host counts (its figures are the fleet's).
    pub fleet: Option<FleetShape>,
}

/// What a report is built from.
#[derive(Debug, Clone, PartialEq)]
pub struct Source {
    /// Run, matrix or campaign.
    pub kind: ReportKind,
    /// How the user names it: `run 12`, `matrix m3`, `campaign dc (group 4)`, a file name.
    pub title: String,
    /// Campaign name, if a campaign.
    pub name: Option<String>,
    /// Order seed of a matrix or campaign.
    pub seed: Option<u64>,
    /// History group.
    pub group: Option<i64>,
    /// Whether every planned run completed.
    pub finished: bool,
    /// What the report cannot show and why (a matrix whose stored axes do not read): first
    /// among its warnings.
    pub notes: Vec<String>,
    /// The tiers.
    pub tiers: Vec<TierInput>,
    /// A mesh: its agents and pairs (its one tier's cells are the pairs).
    pub mesh: Option<crate::stats::mesh::MeshShape>,
}

/// A stored run in the report, with its derived summary.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportRun {
    /// Tier index.
    pub tier: usize,
    /// Cell index within the tier.
    pub cell: usize,
    /// Repetition.
    pub repetition: u32,
    /// History id.
    pub id: Option<i64>,
    /// The raw record.
    pub record: RunRecord,
    /// `stats::summarize` of the record.
    pub summary: Summary,
}

/// One interval of one stream.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Point {
    /// Interval start, seconds since the stream's start.
    pub start_seconds: f64,
    /// Interval end.
    pub end_seconds: f64,
    /// Bytes in the interval.
    pub bytes: u64,
    /// bytes × 8 / length; None for an empty interval.
    pub bits_per_second: Option<f64>,
    /// Inside the omitted warm-up.
    pub omitted: bool,
    /// The sender's retransmitted segments so far (TCP_INFO at the interval's end).
    pub retransmits_total: Option<u64>,
    /// A request/response stream's transactions and latency in the interval.
    pub rr: Option<linerate_proto::latency::RrIntervalSample>,
}

/// The intervals of one stream of one run, as one end reported them.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Index into [`Report::runs`].
    pub run: usize,
    /// The end that reported it.
    pub end: crate::record::End,
    /// Stream id.
    pub stream: u32,
    /// Which way its data went.
    pub flow: Flow,
    /// Sender or receiver, from `end`'s point of view.
    pub role: StreamRole,
    /// Its intervals, in order.
    pub points: Vec<Point>,
}

/// Everything a report shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// Run, matrix or campaign.
    pub kind: ReportKind,
    /// How the user names it.
    pub title: String,
    /// Campaign name.
    pub name: Option<String>,
    /// Order seed.
    pub seed: Option<u64>,
    /// A matrix's `--until-ci` target.
    pub until_ci: Option<f64>,
    /// History group.
    pub group: Option<i64>,
    /// Every planned run completed.
    pub finished: bool,
    /// UTC date and time of the first run, `2026-11-22 06:00:00`; None without runs.
    pub date: Option<String>,
    /// The servers and what they ran, e.g. `127.0.0.1:5201 (linerate 0.1.0)`.
    pub hosts: String,
    /// The first run's test in words, plus the axes a matrix varied.
    pub settings: String,
    /// One per tier, with its cells' statistics and findings.
    pub tiers: Vec<TierSummary>,
    /// Conclusions across tiers (campaigns).
    pub findings: Vec<String>,
    /// Things the reader must know: failed runs, runs' own warnings (each once).
    pub warnings: Vec<String>,
    /// Every run.
    pub runs: Vec<ReportRun>,
    /// Every stream's intervals, both ends.
    pub series: Vec<Series>,
    /// A mesh's agents, zones and findings (its pairs are the tier's cells).
    pub mesh: Option<crate::stats::mesh::MeshSummary>,
}

impl Report {
    /// A single run's report: the run of tier `tier`; None in a matrix or campaign.
    pub fn single_run(&self, tier: usize) -> Option<&ReportRun> {
        (self.kind == ReportKind::Run).then(|| self.runs.iter().find(|r| r.tier == tier))?
    }

    /// The facts a report opens with: date, hosts, settings, seed, runs.
    pub fn facts(&self) -> Vec<(&'static str, String)> {
        let none = if self.kind == ReportKind::Fleet {
            "n/a (no host runs stored)"
        } else {
            "n/a (no runs)"
        };
        let mut facts = vec![
            ("Date (UTC)", self.date.clone().unwrap_or_else(|| none.into())),
            ("Hosts", self.hosts.clone()),
            ("Settings", self.settings.clone()),
        ];
        let done = if self.finished { "yes" } else { "no: see the warnings" };
        if let Some(fleet) = self.fleet() {
            facts.extend(fleet_facts(fleet, self.seed, done));
            return facts;
        }
        if let Some(seed) = self.seed {
            facts.push(("Order seed", seed.to_string()));
        }
        facts.push(("Runs", format!("{} (every planned run completed: {done})", self.run_count())));
        facts
    }

    /// A fleet report's figures: its one fleet tier's.
    pub fn fleet(&self) -> Option<&FleetTierFigures> {
        (self.kind == ReportKind::Fleet).then(|| self.tiers.first()?.fleet.as_ref())?
    }

    /// `12 completed`, and the stored runs not counted in any figure: `12 completed; not
    /// counted: 1 interrupted, 2 failed`.
    pub fn run_count(&self) -> String {
        let count =
            |f: fn(&Outcome) -> bool| self.runs.iter().filter(|r| f(&r.record.outcome)).count();
        let completed = count(|o| *o == Outcome::Completed);
        let others: Vec<String> = [
            (count(|o| *o == Outcome::Interrupted), "interrupted"),
            (count(|o| matches!(o, Outcome::Failed { .. })), "failed"),
        ]
        .into_iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
        if others.is_empty() {
            format!("{completed} completed")
        } else {
            format!("{completed} completed; not counted: {}", others.join(", "))
        }
    }

    /// The label of a run's cell: in a campaign's fleet tier its host count (`k=K`); in a
    /// fleet report its host's label (in a curve `k=K LABEL`).
    pub fn cell_label(&self, run: &ReportRun) -> String {
        let tier = &self.tiers[run.tier];
        if let Some(f) = &tier.fleet {
            let k = f.shape().counts().get(run.cell).map_or(String::new(), |k| format!("k={k}"));
            if self.kind != ReportKind::Fleet {
                return k;
            }
            let label = crate::stats::fleet::HostInput::placed(&run.record).label;
            return if f.scale.is_empty() { label.to_string() } else { format!("{k} {label}") };
        }
        tier.summary.cells.get(run.cell).map_or(String::new(), |c| c.label.clone())
    }

    /// The streams of run `run` as the data's receiver measured them: per direction, the
    /// receiving end's series, or the sending end's where no receiver reported.
    pub fn received_series(&self, run: usize) -> Vec<&Series> {
        let of_run: Vec<&Series> = self.series.iter().filter(|s| s.run == run).collect();
        of_run
            .iter()
            .filter(|s| {
                s.role == StreamRole::Receiver
                    || !of_run.iter().any(|o| o.flow == s.flow && o.role == StreamRole::Receiver)
            })
            .copied()
            .collect()
    }

    /// Run `run`'s total rate over time per direction: its [`Report::received_series`] summed
    /// interval by interval (the i-th interval of each stream, which one end's clock ticked
    /// together), over the intervals every stream has.
    pub fn run_totals(&self, run: usize) -> Vec<RunTotal> {
        let streams = self.received_series(run);
        let mut flows: Vec<Flow> = Vec::new();
        for s in &streams {
            if !flows.contains(&s.flow) {
                flows.push(s.flow);
            }
        }
        flows
            .into_iter()
            .map(|flow| {
                let of_flow: Vec<&&Series> = streams.iter().filter(|s| s.flow == flow).collect();
                let n = of_flow.iter().map(|s| s.points.len()).min().unwrap_or(0);
                let points = (0..n)
                    .map(|i| {
                        let at: Vec<&Point> = of_flow.iter().map(|s| &s.points[i]).collect();
                        let start = at.iter().map(|p| p.start_seconds).fold(f64::MAX, f64::min);
                        let end = at.iter().map(|p| p.end_seconds).fold(0.0, f64::max);
                        let bytes = at.iter().map(|p| p.bytes).sum::<u64>();
                        let retransmits: Vec<u64> =
                            at.iter().filter_map(|p| p.retransmits_total).collect();
                        Point {
                            start_seconds: start,
                            end_seconds: end,
                            bytes,
                            bits_per_second: (end > start)
                                .then(|| bytes as f64 * 8.0 / (end - start)),
                            omitted: at.iter().any(|p| p.omitted),
                            retransmits_total: (!retransmits.is_empty())
                                .then(|| retransmits.iter().sum()),
                            rr: None,
                        }
                    })
                    .collect();
                RunTotal { flow, streams: of_flow.len(), points }
            })
            .collect()
    }
}

/// A request/response run's transactions in one interval, all streams
/// ([`Report::transactions_over_time`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RrTotal {
    /// Interval start, seconds since the streams' start.
    pub start_seconds: f64,
    /// Interval end.
    pub end_seconds: f64,
    /// Transactions completed in it, every stream.
    pub transactions: u64,
    /// Their rate; None for an empty interval.
    pub per_second: Option<f64>,
    /// The largest latency of any stream in it (exact, also in merged samples).
    pub max_ns: Option<u64>,
    /// Inside the omitted warm-up.
    pub omitted: bool,
}

/// One run's streams of one direction summed over time ([`Report::run_totals`]).
#[derive(Debug, Clone, PartialEq)]
pub struct RunTotal {
    /// Which way the data went.
    pub flow: Flow,
    /// How many streams were summed.
    pub streams: usize,
    /// The summed intervals.
    pub points: Vec<Point>,
}

impl Report {
    /// The client's request/response streams of run `run`: each with its interval samples.
    pub fn rr_series(&self, run: usize) -> Vec<&Series> {
        let of_run =
            self.series.iter().filter(|s| s.run == run && s.end == crate::record::End::Client);
        of_run.filter(|s| s.points.iter().any(|p| p.rr.is_some())).collect()
    }

    /// Run `run`'s transactions summed interval by interval over its request/response streams
    /// (the i-th interval of each, which the client's clock ticked together), over the
    /// intervals every stream has; empty for any other run.
    pub fn transactions_over_time(&self, run: usize) -> Vec<RrTotal> {
        let streams = self.rr_series(run);
        let n = streams.iter().map(|s| s.points.len()).min().unwrap_or(0);
        (0..n)
            .map(|i| {
                let at: Vec<&Point> = streams.iter().map(|s| &s.points[i]).collect();
                let start = at.iter().map(|p| p.start_seconds).fold(f64::MAX, f64::min);
                let end = at.iter().map(|p| p.end_seconds).fold(0.0, f64::max);
                let transactions = at.iter().filter_map(|p| p.rr).map(|r| r.transactions).sum();
                RrTotal {
                    start_seconds: start,
                    end_seconds: end,
                    transactions,
                    per_second: (end > start).then(|| transactions as f64 / (end - start)),
                    max_ns: at.iter().filter_map(|p| p.rr?.max_ns).max(),
                    omitted: at.iter().any(|p| p.omitted),
                }
            })
            .collect()
    }
}

/// A fleet's facts after date, hosts and settings: a curve's host counts, seed and fleet runs,
/// a single fleet's hosts measured.
fn fleet_facts(f: &FleetTierFigures, seed: Option<u64>, done: &str) -> Vec<(&'static str, String)> {
    let partial = |r: &FleetRun| !r.whole();
    if f.scale.is_empty() {
        let Some(run) = f.runs.first() else {
            return vec![("Measured", "n/a (no host runs stored)".into())];
        };
        let s = &run.summary;
        let others = if partial(run) { " (the others: see Not measured)" } else { "" };
        return vec![(
            "Measured",
            format!("{} of {} hosts{others}", s.hosts_measured, s.hosts_planned),
        )];
    }
    let mut counts: Vec<usize> = f.runs.iter().map(|r| r.hosts).collect();
    counts.sort_unstable();
    counts.dedup();
    let counts: Vec<String> = counts.iter().map(usize::to_string).collect();
    let mut facts = vec![("Host counts", counts.join(", "))];
    if let Some(seed) = seed {
        facts.push(("Order seed", seed.to_string()));
    }
    let n = f.runs.iter().filter(|r| partial(r)).count();
    let stored = f.runs.len();
    facts.push((
        "Fleet runs",
        format!("{stored} stored, {n} partial (every planned run completed: {done})"),
    ));
    facts
}

/// A fleet's targets in words, from its largest fleet run (a curve's k-th run has the first k):
/// `a (127.0.0.1:5201, linerate 0.1.0), b (…)`.
fn fleet_hosts(f: &FleetTierFigures, runs: &[ReportRun]) -> String {
    let Some(largest) = f.runs.iter().max_by_key(|r| r.records.len()) else {
        return "n/a (no host runs stored)".into();
    };
    let hosts: Vec<String> = largest
        .records
        .iter()
        .filter_map(|&i| runs.get(i))
        .map(|r| {
            let software = r.record.server_software.as_deref().unwrap_or("server software unknown");
            let label = r.record.fleet.as_ref().map_or("", |p| p.label.as_str());
            format!("{label} ({}, {software})", r.record.server)
        })
        .collect();
    if hosts.is_empty() { "n/a (no host runs stored)".into() } else { hosts.join(", ") }
}

/// What the reader of a fleet report must know: for a curve, each partial fleet run's hosts
/// that were not measured and why (a single fleet lists them in its own section).
fn fleet_warnings(f: &FleetTierFigures) -> Vec<String> {
    if f.scale.is_empty() {
        return Vec::new();
    }
    let mut out: Vec<String> = f
        .runs
        .iter()
        .flat_map(|r| {
            r.summary.not_measured.iter().map(move |(label, why)| {
                format!(
                    "{} hosts, run {}: {label} not measured ({why}); the run is left out of its \
                     point",
                    r.hosts, r.repetition
                )
            })
        })
        .collect();
    // A host whose CPU set its rate: its run stays in the point, which says so.
    for r in f.runs.iter().filter(|r| r.whole()) {
        for d in &r.summary.directions {
            for h in d.hosts.iter().filter(|h| h.limit.as_deref().is_some_and(cpu_contended)) {
                out.push(format!(
                    "{} hosts, run {}: {}'s run was CPU-contended ({}); the run's total is in its \
                     point",
                    r.hosts,
                    r.repetition,
                    h.label,
                    h.limit_summary.as_deref().unwrap_or("no words")
                ));
            }
        }
    }
    out
}

/// Computes the report.
pub fn build(source: Source) -> Report {
    let until_ci = source.tiers.first().and_then(|t| t.until_ci);
    let mesh = source.mesh.as_ref().zip(source.tiers.first()).map(|(shape, t)| {
        let runs: Vec<(usize, &RunRecord)> = t.runs.iter().map(|r| (r.cell, &r.record)).collect();
        crate::stats::mesh::summarize_mesh(&shape.agents, &shape.pairs, &t.cells, &runs, until_ci)
    });
    let mut tiers = Vec::new();
    let mut runs = Vec::new();
    for (t, input) in source.tiers.into_iter().enumerate() {
        let mut tier = match &input.fleet {
            Some(shape) => {
                let runs: Vec<(usize, u32, RunRecord)> =
                    input.runs.iter().map(|r| (r.cell, r.repetition, r.record.clone())).collect();
                let stopped = input.stopped.as_deref();
                summarize_fleet_place(input.place, input.ipv6, shape, &runs, stopped)
            }
            None => {
                let pairs: Vec<(usize, RunRecord)> =
                    input.runs.iter().map(|r| (r.cell, r.record.clone())).collect();
                let stopped = input.stopped.as_deref();
                summarize_place(
                    input.place,
                    input.ipv6,
                    &input.cells,
                    input.until_ci,
                    &pairs,
                    stopped,
                )
            }
        };
        for run in input.runs {
            let summary = summarize(&run.record);
            runs.push(ReportRun {
                tier: t,
                cell: run.cell,
                repetition: run.repetition,
                id: run.id,
                record: run.record,
                summary,
            });
        }
        if source.kind == ReportKind::Run {
            single_run_cell(&mut tier, runs.last());
        }
        tiers.push(tier);
    }
    // A mesh's one tier is the mesh, not its first run's server (issue 46).
    if let (Some(shape), Some(t)) = (&source.mesh, tiers.first_mut()) {
        t.server = format!("{} agents, {} ordered pairs", shape.agents.len(), shape.pairs.len());
    }
    let findings =
        if source.kind == ReportKind::Campaign { cross_tier_findings(&tiers) } else { Vec::new() };
    let series = runs.iter().enumerate().flat_map(|(i, r)| series_of(i, &r.record)).collect();
    let first = runs.iter().min_by_key(|r| r.record.started_unix_ms);
    // A fleet's hosts are named by their labels, its test is every host's, and its warnings
    // are its partial fleet runs (a failed host is one of those, not a failed run).
    let fleet =
        tiers.first().and_then(|t| t.fleet.as_ref()).filter(|_| source.kind == ReportKind::Fleet);
    let (hosts, settings, mut warnings) = match fleet {
        Some(f) => (
            fleet_hosts(f, &runs),
            runs.first()
                .map_or("n/a (no host runs stored)".into(), |r| describe_spec(&r.record.spec)),
            fleet_warnings(f),
        ),
        None => (
            hosts(&runs),
            first.map_or("no runs".into(), |r| settings(&r.record, &tiers)),
            warnings(&runs, &tiers),
        ),
    };
    warnings.splice(0..0, source.notes);
    Report {
        kind: source.kind,
        title: source.title,
        name: source.name,
        seed: source.seed,
        until_ci,
        group: source.group,
        finished: source.finished,
        date: first.map(|r| utc(r.record.started_unix_ms)),
        hosts,
        settings,
        warnings,
        tiers,
        findings,
        runs,
        series,
        mesh,
    }
}

/// A single run's cell is named after the run, and its findings are its verdicts with their
/// evidence (a matrix's "best cell" means nothing with one cell).
fn single_run_cell(tier: &mut TierSummary, run: Option<&ReportRun>) {
    let Some(run) = run else { return };
    let label = run.id.map_or("run".to_string(), |id| format!("run {id}"));
    for c in &mut tier.summary.cells {
        c.label = label.clone();
    }
    tier.best_cell = tier.best_cell.as_ref().map(|_| label.clone());
    let failed = matches!(run.record.outcome, Outcome::Failed { .. });
    // A failed run's verdicts judge the little it moved, if anything: not a finding.
    tier.summary.findings = run
        .summary
        .verdicts
        .iter()
        .filter(|_| !failed)
        .map(|v| {
            let evidence = if v.evidence.is_empty() {
                String::new()
            } else {
                format!(" ({})", v.evidence.join("; "))
            };
            format!("{}: {}{evidence}", v.flow.label(), v.summary)
        })
        .collect();
    if let Outcome::Failed { error, .. } = &run.record.outcome {
        tier.summary.findings.push(format!("the run failed: {error}"));
    }
}

fn hosts(runs: &[ReportRun]) -> String {
    let mut seen: Vec<String> = Vec::new();
    for r in runs {
        let software = r.record.server_software.as_deref().unwrap_or("server software unknown");
        let h = format!("{} ({software})", r.record.server);
        if !seen.contains(&h) {
            seen.push(h);
        }
    }
    if seen.is_empty() { "n/a (no runs)".into() } else { seen.join(", ") }
}

/// The first run's test, and for matrices the values each varied axis took (those parts of
/// the first run's test are left out: they differ between cells).
fn settings(first: &RunRecord, tiers: &[TierSummary]) -> String {
    // Values grouped by axis (kind), in the order they first appear.
    let mut axes: Vec<Vec<AxisValue>> = Vec::new();
    for v in tiers.iter().flat_map(|t| &t.summary.cells).flat_map(|c| &c.values) {
        let kind = std::mem::discriminant(v);
        match axes.iter_mut().find(|a| std::mem::discriminant(&a[0]) == kind) {
            Some(a) if !a.contains(v) => a.push(*v),
            Some(_) => {}
            None => axes.push(vec![*v]),
        }
    }
    axes.retain(|a| a.len() > 1);
    let skip: Vec<&str> = axes
        .iter()
        .map(|a| match a[0] {
            AxisValue::Parallel(_) => "streams",
            AxisValue::Window(_) => "window",
            AxisValue::Length(_) => "length",
            AxisValue::Protocol(_) | AxisValue::Direction(_) => "protocol",
        })
        .collect();
    let base = describe_spec_without(&first.spec, &skip);
    if axes.is_empty() {
        return base;
    }
    let varied: Vec<String> =
        axes.iter().map(|a| a.iter().map(AxisValue::label).collect::<Vec<_>>().join(",")).collect();
    format!("varied: {}; fixed: {base}", varied.join(" x "))
}

/// Failed or interrupted runs and every run's warnings, each text once (with the runs it came
/// from), and tiers that stopped early.
fn warnings(runs: &[ReportRun], tiers: &[TierSummary]) -> Vec<String> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    let name = |r: &ReportRun| match r.id {
        Some(id) => format!("run {id}"),
        None => {
            let cell = tiers[r.tier].summary.cells.get(r.cell).map_or("", |c| c.label.as_str());
            let tier =
                if tiers.len() > 1 { format!("{}/", tiers[r.tier].name) } else { String::new() };
            format!("{tier}{cell} #{}", r.repetition)
        }
    };
    for r in runs {
        let mut texts: Vec<String> = match &r.record.outcome {
            Outcome::Completed => Vec::new(),
            Outcome::Interrupted => vec!["interrupted: figures cover the time until then".into()],
            Outcome::Failed { error, .. } => vec![format!("failed: {error}")],
        };
        texts.extend(r.record.warnings.iter().chain(&r.summary.warnings).cloned());
        for text in texts {
            match out.iter_mut().find(|(t, _)| *t == text) {
                Some((_, from)) => from.push(name(r)),
                None => out.push((text, vec![name(r)])),
            }
        }
    }
    let mut lines: Vec<String> = tiers
        .iter()
        .filter_map(|t| Some(format!("{}: stopped early: {}", t.name, t.stopped.as_ref()?)))
        .collect();
    lines.extend(out.into_iter().map(|(text, from)| format!("{}: {text}", from.join(", "))));
    lines
}

/// Every stream of `record` (both ends) as time series, as run `run` of a report.
pub fn series_of(run: usize, record: &RunRecord) -> Vec<Series> {
    record
        .all_streams()
        .map(|(end, s)| Series {
            run,
            end,
            stream: s.id,
            flow: s.flow,
            role: s.role,
            points: s
                .intervals
                .iter()
                .map(|i| {
                    let secs = i.end_us.saturating_sub(i.start_us) as f64 / 1e6;
                    Point {
                        start_seconds: i.start_us as f64 / 1e6,
                        end_seconds: i.end_us as f64 / 1e6,
                        bytes: i.bytes,
                        bits_per_second: (secs > 0.0).then(|| i.bytes as f64 * 8.0 / secs),
                        omitted: i.omitted,
                        retransmits_total: i.tcp.map(|t| u64::from(t.total_retrans)),
                        rr: i.rr,
                    }
                })
                .collect(),
        })
        .collect()
}
