//! SVG charts of a report, made for reading at a glance on a screen 1400 px wide and on paper:
//! full width, text of 13–18 units (≥ 12 px wherever the page is 1000 px wide or more), no
//! text on another or on the data (legends sit above the plot), a colour-blind-safe palette,
//! every axis with its unit, every plotted value with its exact figure on hover (an SVG
//! `<title>`: no script), and each chart with a one-sentence caption of what it shows.
//!
//! Charts: every run's throughput over time (one panel per cell), each cell's median and
//! min–max with its single runs, throughput against each varied axis, CPU per Gbit/s, per-flow
//! fairness on its 0–1 scale, each stream of a single run, a campaign's tiers against their
//! links, and for `compare` both sides' cells on one axis; for a fleet, each host's rate and
//! flows against the hosts' mean, and a scaling curve's total against the number of hosts;
//! for latency (`latency`, `latency_cells`), the latency CDF of a request/response run or of a
//! test under load's idle and loaded probes (and of A and B), a test under load's throughput
//! above its probe latency on one time axis, and a request/response matrix's transactions and
//! latency per cell; for a mesh, its pair × pair heat map (`heat.rs`). Every value comes from the report model; this module chooses and draws,
//! it computes no statistic.

mod axis;
mod cells;
mod fleet;
mod frame;
mod heat;
mod latency;
mod latency_cells;
mod lines;
mod rows;
mod rr_time;
mod svg;
mod time;
mod trend;

pub use heat::heat_map;
pub use trend::trend;

use crate::report::model::{Report, ReportKind, ReportRun};
use crate::stats::campaign_fleet::FleetTierFigures;
use crate::stats::matrix::CellSummary;

/// One drawn chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    /// Which kind of chart (`over-time`, `cells`, `vs-axis`, `cpu`, `fairness`, `streams`,
    /// `tiers`, `compare`, `scaling`, `latency-cdf`, `latency-over-time`, `latency-cells`,
    /// `heat-map`): a
    /// stable name for the page and the docs.
    pub kind: &'static str,
    /// What it shows, as its heading says.
    pub title: String,
    /// One sentence saying how to read it.
    pub caption: String,
    /// The `<svg>` element.
    pub svg: String,
}

/// The context lines under a chart's title: when and where, then how.
fn context(report: &Report) -> Vec<String> {
    let date = report.date.as_deref().map_or("no date".into(), |d| format!("{d} UTC"));
    vec![format!("{date} · {}", report.hosts), report.settings.clone()]
}

/// How a run is named in a chart: a single run by its history id or the report's name; a run
/// of a matrix or campaign by its cell and repetition, and its history id when stored.
fn run_name(report: &Report, r: &ReportRun) -> String {
    match (r.id, report.kind) {
        (Some(id), ReportKind::Run) => format!("run {id}"),
        (None, ReportKind::Run) => report.title.clone(),
        (id, _) => {
            let stored = id.map_or(String::new(), |id| format!(" (run {id})"));
            format!("{} #{}{stored}", report.cell_label(r), r.repetition)
        }
    }
}

/// Every chart of a report, in reading order.
pub fn report_charts(report: &Report) -> Vec<Chart> {
    let context = context(report);
    let mut out = Vec::new();
    out.extend(report.mesh.as_ref().and_then(|m| heat_map(m, &context)));
    for (t, tier) in report.tiers.iter().enumerate() {
        let prefix =
            if report.tiers.len() > 1 { format!("{}: ", tier.name) } else { String::new() };
        let cells = &tier.summary.cells[..];
        if let Some(f) = &tier.fleet {
            out.extend(fleet_charts(f, &context));
            continue; // a fleet tier's runs are no matrix cells
        }
        if report.kind != ReportKind::Run && cells.iter().any(|c| c.latency.is_some()) {
            // Request/response cells: their bytes are requests, their answer this chart.
            out.extend(latency_cells::cells(cells, &prefix, &context));
            continue;
        }
        if report.kind == ReportKind::Run {
            if let Some(run) = report.runs.iter().position(|r| r.tier == t) {
                // A request/response run's bytes are requests: its charts are its latency's.
                if report.runs[run].record.spec.rr.is_none() {
                    out.extend(time::run_over_time(report, run, &prefix, &context));
                    out.extend(latency::under_load_over_time(report, run, &prefix, &context));
                    out.extend(cells::per_stream(report, run, &prefix, &context));
                }
                out.extend(rr_time::over_time(report, run, &prefix, &context));
                out.extend(latency::latency_cdf(report, run, &prefix, &context));
            }
        } else {
            out.extend(time::cells_over_time(report, t, &prefix, &context));
            let title =
                format!("{prefix}Received throughput per cell: median, min–max and each run");
            out.push(cells::whiskers(&[(tier.name.as_str(), cells)], &title, &context));
            for axis in cells::varied_axes(tier) {
                out.push(cells::versus(tier, axis, &prefix, &context));
            }
        }
        let rr = report.single_run(t).is_some_and(|r| r.record.spec.rr.is_some());
        let cpu =
            cells.iter().any(|c| c.client_cpu_percent.is_some() || c.server_cpu_percent.is_some());
        if cpu && !rr {
            out.push(cells::cpu_per_gbit(cells, &prefix, &context));
        }
        if report.kind != ReportKind::Run && cells.iter().any(|c| c.fairness.is_some()) {
            out.push(cells::fairness(cells, &prefix, &context));
        }
    }
    if report.kind == ReportKind::Campaign {
        out.push(cells::tiers_vs_links(&report.tiers, &context));
    }
    out
}

/// The charts of a fleet tier: of a scaling curve, the total against the number of hosts;
/// of a single fleet run, per direction how fairly the hosts shared.
fn fleet_charts(f: &FleetTierFigures, context: &[String]) -> Vec<Chart> {
    if !f.scale.is_empty() {
        let curve = &f.curve;
        return if curve.directions.is_empty() {
            Vec::new()
        } else {
            vec![fleet::scaling(curve, context)]
        };
    }
    match f.counted().collect::<Vec<_>>()[..] {
        [run] => run.summary.directions.iter().map(|d| fleet::fairness(d, context)).collect(),
        _ => Vec::new(),
    }
}

/// A report's cells under the names `compare` matches them by: `TIER/CELL` in a campaign,
/// `run` for a single run, the cell label in a matrix.
fn compare_cells(r: &Report) -> Vec<CellSummary> {
    let mut out = Vec::new();
    for t in &r.tiers {
        for c in &t.summary.cells {
            let mut c = c.clone();
            c.label = match r.kind {
                ReportKind::Campaign => format!("{}/{}", t.name, c.label),
                ReportKind::Run => "run".into(),
                ReportKind::Matrix | ReportKind::Fleet => c.label,
            };
            out.push(c);
        }
    }
    out
}

/// `compare A B --html`: both sides' cells on one throughput axis, unless both are
/// request/response runs (their bytes are requests); and two latency runs' CDFs.
pub fn compare_charts(a: &Report, b: &Report) -> Vec<Chart> {
    let rr = |r: &Report| r.runs.first().is_some_and(|r| r.record.spec.rr.is_some());
    let context = compare_context(a, b);
    if !(rr(a) && rr(b)) {
        let mut out = vec![compare(a, b)];
        out.extend(latency::compare_cdf(a, b, &context));
        return out;
    }
    if a.kind == ReportKind::Run && b.kind == ReportKind::Run {
        return latency::compare_cdf(a, b, &context).into_iter().collect();
    }
    // Request/response matrices: each side's transactions and latency per cell.
    let sides = [("A", a), ("B", b)];
    let of = |(name, r): (&str, &Report)| {
        let cells = compare_cells(r);
        latency_cells::cells(&cells, &format!("{name}: {}: ", r.title), &context)
    };
    sides.into_iter().filter_map(of).collect()
}

/// The context lines of a comparison's chart: each side's name, date, hosts and settings.
fn compare_context(a: &Report, b: &Report) -> Vec<String> {
    let side = |name: &str, r: &Report| {
        let date = r.date.as_deref().map_or("no date".into(), |d| format!("{d} UTC"));
        format!("{name}: {}, {date} · {}; {}", r.title, r.hosts, r.settings)
    };
    vec![side("A", a), side("B", b)]
}

/// `compare A B --html`: both sides' cells on one throughput axis.
pub fn compare(a: &Report, b: &Report) -> Chart {
    let context = compare_context(a, b);
    let (ca, cb) = (compare_cells(a), compare_cells(b));
    let (na, nb) = (format!("A: {}", a.title), format!("B: {}", b.title));
    let title = "A and B: received throughput per cell";
    let mut chart =
        cells::whiskers(&[(na.as_str(), &ca[..]), (nb.as_str(), &cb[..])], title, &context);
    chart.kind = "compare";
    chart.caption = "Received throughput of every cell in A and in B over their completed runs: \
                     the square is the median, the whisker spans min to max and the rings are \
                     the single runs; a cell only one side has is marked missing on the other."
        .into();
    chart
}
