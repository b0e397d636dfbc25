//! Latency charts of a run: the latency CDF (a request/response run's transactions, or a test
//! under load's idle and loaded probes on one chart) on a logarithmic latency axis, and for a
//! test under load its throughput and probe latency over time on one time axis, stacked as
//! flent's RRUL plot: does the latency rise when the load does?
//!
//! The CDF is drawn from the merged histograms (`stats::latency::cdf`), its dots are the
//! percentiles of the report's table; the over-time latency is the loaded probes' per-interval
//! median and 99th percentile, the idle probes' as dashed reference lines (they ran before
//! the test). Chooses and draws; computes no statistic.

use linerate_proto::histogram::DurationHistogram;
use linerate_proto::latency::RrIntervalSample;

use super::axis::RateUnit;
use super::frame::{Heading, Key, Swatch};
use super::lines::{Line, Panel, Panels, Point, XAxis, YAxis, draw};
use super::svg::{Stroke, colour};
use super::time::{flow_words, seconds, steps};
use super::{Chart, run_name};
use crate::record::ProbePhase;
use crate::report::model::{Report, ReportRun, RunTotal};
use crate::report::words::lat;
use crate::stats::latency::cdf;
use crate::stats::under_load::{PhaseFigures, phase_intervals};

/// A unit latencies are drawn in: nanoseconds per unit and its name.
#[derive(Debug, Clone, Copy)]
pub(super) struct LatencyUnit(f64, pub(super) &'static str);

impl LatencyUnit {
    /// The unit that suits latencies around `typical` nanoseconds.
    pub(super) fn around(typical: f64) -> LatencyUnit {
        match typical {
            t if t >= 1e6 => LatencyUnit(1e6, "ms"),
            t if t >= 1e3 => LatencyUnit(1e3, "µs"),
            _ => LatencyUnit(1.0, "ns"),
        }
    }

    pub(super) fn of(self, ns: u64) -> f64 {
        ns as f64 / self.0
    }
}

/// One curve of a CDF: its name, look, cumulative points and the percentiles marked on it.
struct Curve {
    label: String,
    stroke: Stroke<'static>,
    points: Vec<(u64, f64)>,
    /// (name, latency, share at or below it).
    marks: Vec<(&'static str, Option<u64>, f64)>,
}

/// A phase's marks: its percentiles and maximum.
fn phase_marks(f: &PhaseFigures) -> Vec<(&'static str, Option<u64>, f64)> {
    vec![
        ("p50", f.p50_ns, 0.5),
        ("p90", f.p90_ns, 0.9),
        ("p99", f.p99_ns, 0.99),
        ("max", f.max_ns, 1.0),
    ]
}

/// Draws `curves` (those with points) as one CDF chart.
fn cdf_chart(
    curves: Vec<Curve>,
    title: String,
    what: &str,
    caption: String,
    context: &[String],
) -> Option<Chart> {
    let curves: Vec<Curve> = curves.into_iter().filter(|c| !c.points.is_empty()).collect();
    let xs = || curves.iter().flat_map(|c| c.points.iter().map(|p| p.0 as f64));
    let (lo, hi) = (xs().fold(f64::MAX, f64::min), xs().fold(0.0, f64::max));
    if curves.is_empty() {
        return None;
    }
    let unit = LatencyUnit::around((lo.max(1.0) * hi.max(1.0)).sqrt());
    let mut keys = Vec::new();
    let mut lines = Vec::new();
    for c in curves {
        let x = |ns: u64| unit.of(ns);
        let mut path = vec![(x(c.points[0].0), 0.0)];
        let mut last = 0.0;
        for (ns, share) in &c.points {
            path.push((x(*ns), last));
            path.push((x(*ns), share * 100.0));
            last = share * 100.0;
        }
        let points = c
            .marks
            .iter()
            .filter_map(|(name, ns, share)| {
                let ns = (*ns)?;
                let at = match *name {
                    "min" => "the fastest".to_string(),
                    "max" => "the slowest".to_string(),
                    _ => format!("{} % at or below", seconds(share * 100.0)),
                };
                let hover = format!("{}: {name} {} ({at})", c.label, lat(Some(ns)));
                Some(Point { x: x(ns), y: share * 100.0, hover })
            })
            .collect();
        keys.push(Key {
            label: c.label.clone(),
            swatch: Swatch::Line(c.stroke.colour, 2.0, c.stroke.dash),
        });
        lines.push(Line { stroke: c.stroke, path, points });
    }
    let chart = Panels {
        heading: Heading { title: title.clone(), context: context.to_vec() },
        keys,
        panels: vec![Panel::of(lines)],
        x: XAxis::Log(unit.of(lo as u64), unit.of(hi as u64)),
        x_title: format!("latency ({}, logarithmic scale)", unit.1),
        y_max: 100.0,
        y_title: format!("{what} at or below that latency (%)"),
    };
    Some(Chart { kind: "latency-cdf", title, caption, svg: draw(&chart) })
}

/// The CDF curves of run `r`: a request/response run's transactions (true), or a test under
/// load's idle (dashed) and loaded probes (false); labels start with `side` (`A: ` in a
/// comparison), the curves take `colours` (transactions or idle, loaded). None for a bulk run.
fn run_curves(r: &ReportRun, side: &str, colours: (usize, usize)) -> Option<(Vec<Curve>, bool)> {
    if let Some(l) = &r.summary.latency {
        let mut marks = vec![("min", l.min_ns, 0.0)];
        let shares = [0.5, 0.9, 0.99, 0.999, 0.9999];
        let names = ["p50", "p90", "p99", "p99.9", "p99.99"];
        marks.extend(
            names.into_iter().zip(l.percentiles()).zip(shares).map(|((n, v), s)| (n, v, s)),
        );
        marks.push(("max", l.max_ns, 1.0));
        let curve = Curve {
            label: format!("{side}{} transactions of {} stream(s)", l.transactions, l.streams),
            stroke: Stroke::solid(colour(colours.0), 2.5),
            points: cdf(&l.histogram),
            marks,
        };
        return Some((vec![curve], true));
    }
    let u = r.summary.under_load.as_ref()?;
    let probes = r.record.probes.as_deref()?;
    let phase = |name: &str, p: &ProbePhase, f: Option<&PhaseFigures>, stroke| {
        let histogram =
            p.latency.as_ref().map_or_else(DurationHistogram::new, |l| l.histogram.clone());
        Curve {
            label: format!("{side}{name}, {} s", seconds(p.duration_ms as f64 / 1e3)),
            stroke,
            points: cdf(&histogram),
            marks: f.map(phase_marks).unwrap_or_default(),
        }
    };
    let idle_stroke = Stroke { colour: colour(colours.0), width: 2.5, dash: Some("9 5") };
    let idle = phase("idle: before the test", &probes.idle, u.idle.as_ref(), idle_stroke);
    let loaded_stroke = Stroke::solid(colour(colours.1), 2.5);
    let loaded = phase("loaded: beside the test", &probes.loaded, u.loaded.as_ref(), loaded_stroke);
    Some((vec![idle, loaded], false))
}

/// The latency CDF of run `run`: a request/response run's transactions, or a test under load's
/// idle and loaded probes; None for any other run.
pub fn latency_cdf(report: &Report, run: usize, prefix: &str, context: &[String]) -> Option<Chart> {
    let r = &report.runs[run];
    let name = run_name(report, r);
    let (curves, rr) = run_curves(r, "", (0, 3))?;
    if rr {
        let caption = format!(
            "The share of {name}'s transactions (every stream's merged) that completed within each latency, on a logarithmic latency axis: the dots are the percentiles of the table and the curve ends at the slowest transaction."
        );
        let title = format!("{prefix}Latency distribution (CDF) of {name}");
        return cdf_chart(curves, title, "transactions", caption, context);
    }
    let caption = format!(
        "The share of {name}'s latency probes answered within each latency, on a logarithmic latency axis, on the idle path (dashed) and beside the test's load (solid): a loaded curve far right of the idle one is delay the load added."
    );
    let title = format!("{prefix}Probe latency distribution (CDF), idle and loaded, of {name}");
    cdf_chart(curves, title, "probes", caption, context)
}

/// `compare A B --html` of two single latency runs of one kind: A's and B's CDFs on one chart
/// (A blue, B orange; under load, each side's idle probes dashed); None otherwise.
pub fn compare_cdf(a: &Report, b: &Report, context: &[String]) -> Option<Chart> {
    let single = |r: &Report| r.kind == crate::report::model::ReportKind::Run;
    if !(single(a) && single(b)) {
        return None; // a matrix's first run does not stand for it
    }
    let (ra, rb) = (a.runs.first()?, b.runs.first()?);
    let (mut curves, rr) = run_curves(ra, "A: ", (0, 0))?;
    let (more, rr_b) = run_curves(rb, "B: ", (1, 1))?;
    if rr != rr_b {
        return None;
    }
    curves.extend(more);
    let what = if rr { "transactions" } else { "probes" };
    let caption = format!(
        "The share of A's (blue) and B's (orange) {what} that completed within each latency, on a logarithmic latency axis{}: a curve further left is faster, and its dots are the percentiles of the table.",
        if rr { "" } else { ", each side's idle probes dashed and its loaded ones solid" }
    );
    let title = format!("A and B: latency distribution (CDF) of their {what}");
    let mut chart = cdf_chart(curves, title, what, caption, context)?;
    chart.kind = "latency-cdf";
    Some(chart)
}

/// A percentile drawn over time: its name, where interval samples and a phase's figures keep
/// it, and its colour.
struct Drawn {
    name: &'static str,
    interval: fn(&RrIntervalSample) -> Option<u64>,
    phase: fn(&PhaseFigures) -> Option<u64>,
    colour: usize,
}

/// The probe percentiles drawn over time.
const DRAWN: [Drawn; 2] = [
    Drawn { name: "p50", interval: |s| s.p50_ns, phase: |f| f.p50_ns, colour: 2 },
    Drawn { name: "p99", interval: |s| s.p99_ns, phase: |f| f.p99_ns, colour: 3 },
];

/// Each direction's received throughput as steps, their keys, and their axis.
fn throughput_lines(totals: &[RunTotal], keys: &mut Vec<Key>) -> (Vec<Line>, YAxis) {
    let points = totals.iter().flat_map(|t| &t.points);
    let y_max = points.filter_map(|p| p.bits_per_second).fold(0.0, f64::max);
    let rate = RateUnit::for_max(y_max);
    let mut lines = Vec::new();
    for (k, t) in totals.iter().enumerate() {
        let what = format!("received throughput, {}", flow_words(t.flow));
        let (path, points) = steps(&t.points, rate, &what);
        let stroke = Stroke::solid(colour(k), 2.5);
        keys.push(Key { label: what, swatch: Swatch::Line(stroke.colour, 2.5, None) });
        lines.push(Line { stroke, path, points });
    }
    let title = format!("received throughput ({})", rate.name);
    (lines, YAxis { max: rate.of(y_max), title, log_from: None })
}

/// The loaded probes' percentiles per interval (placed on the test's clock) as steps, the
/// idle ones' as dashed lines across `x_max`, their keys and their axis; None without any.
fn probe_lines(
    loaded: &[(f64, f64, &RrIntervalSample)],
    idle: Option<&PhaseFigures>,
    x_max: f64,
    keys: &mut Vec<Key>,
) -> Option<(Vec<Line>, YAxis)> {
    let in_loaded = loaded.iter().filter_map(|(_, _, s)| s.p99_ns.or(s.p50_ns));
    let lat_max = in_loaded.chain(idle.and_then(|f| f.p99_ns)).max()?;
    let unit = LatencyUnit::around(lat_max as f64);
    let mut lines = Vec::new();
    for d in &DRAWN {
        let what = format!("loaded probes' {} per interval", d.name);
        let (mut path, mut points) = (Vec::new(), Vec::new());
        for (a, b, s) in loaded {
            let Some(ns) = (d.interval)(s) else { continue };
            let y = unit.of(ns);
            path.extend([(*a, y), (*b, y)]);
            let (from, to, n) = (seconds(*a), seconds(*b), s.transactions);
            let hover = format!("{what}, {from}–{to} s: {} ({n} probes)", lat(Some(ns)));
            points.push(Point { x: (a + b) / 2.0, y, hover });
        }
        let stroke = Stroke::solid(colour(d.colour), 2.5);
        if !path.is_empty() {
            keys.push(Key { label: what, swatch: Swatch::Line(stroke.colour, 2.5, None) });
            lines.push(Line { stroke, path, points });
        }
        if let Some(ns) = idle.and_then(d.phase) {
            let what = format!("idle probes' {} (before the test)", d.name);
            let (y, hover) = (unit.of(ns), format!("{what}: {}", lat(Some(ns))));
            let stroke = Stroke { colour: colour(d.colour), width: 1.5, dash: Some("9 5") };
            keys.push(Key { label: what, swatch: Swatch::Line(stroke.colour, 1.5, stroke.dash) });
            let points = vec![Point { x: x_max / 2.0, y, hover }];
            lines.push(Line { stroke, path: vec![(0.0, y), (x_max, y)], points });
        }
    }
    let title = format!("probe latency ({})", unit.1);
    Some((lines, YAxis { max: unit.of(lat_max), title, log_from: None }))
}

/// A test under load's throughput (each direction's streams summed) above its probe latency
/// (the loaded probes' median and 99th percentile per interval, the idle ones' as dashed
/// lines), on one time axis; None for any other run.
pub fn under_load_over_time(
    report: &Report,
    run: usize,
    prefix: &str,
    context: &[String],
) -> Option<Chart> {
    let r = &report.runs[run];
    let u = r.summary.under_load.as_ref()?;
    let probes = r.record.probes.as_deref()?;
    let name = run_name(report, r);
    let totals = report.run_totals(run);
    let loaded_from = probes.loaded.from_ms as f64 / 1e3;
    let loaded: Vec<(f64, f64, _)> = phase_intervals(&probes.loaded)
        .into_iter()
        .map(|(a, b, s)| (a + loaded_from, b + loaded_from, s))
        .collect();
    let x_max = totals
        .iter()
        .flat_map(|t| t.points.iter().map(|p| p.end_seconds))
        .chain(loaded.iter().map(|(_, b, _)| *b))
        .fold(0.0, f64::max);
    if x_max <= 0.0 {
        return None;
    }
    let mut keys = Vec::new();
    let (top, rate_axis) = throughput_lines(&totals, &mut keys);
    let idle = u.idle.as_ref();
    let (bottom, probe_axis) = probe_lines(&loaded, idle, x_max, &mut keys)?;
    let title = format!("{prefix}Throughput and probe latency over time of {name}");
    let caption = format!(
        "{name}'s received throughput (above) and its latency probes' median and 99th percentile per interval while the load ran (below), on one time axis, with the idle probes' figures from before the test dashed: latency that rises with the load is a queue filling."
    );
    let heading = Heading { title: title.clone(), context: context.to_vec() };
    let panels = [("Throughput", top, rate_axis), ("Probe latency", bottom, probe_axis)];
    let svg = stacked_over_time(heading, keys, panels, x_max);
    Some(Chart { kind: "latency-over-time", title, caption, svg })
}

/// Two panels, each with its own y axis, stacked on one time axis from 0 to `x_max` seconds
/// since the test's start: (title, lines, axis) each, the upper first.
pub(super) fn stacked_over_time(
    heading: Heading,
    keys: Vec<Key>,
    panels: [(&str, Vec<Line>, YAxis); 2],
    x_max: f64,
) -> String {
    let panels = panels
        .into_iter()
        .map(|(title, lines, y)| Panel { title: title.into(), y: Some(y), ..Panel::of(lines) })
        .collect();
    draw(&Panels {
        heading,
        keys,
        panels,
        x: XAxis::Numeric(x_max),
        x_title: "time since the start of the test (s)".into(),
        y_max: 0.0,
        y_title: String::new(),
    })
}
