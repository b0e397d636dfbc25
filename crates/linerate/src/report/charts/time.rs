//! Throughput over time: a single run's streams (and their sum), or every run of a matrix or
//! campaign tier — one panel per cell, one colour per repetition — so no run is hidden behind
//! a chosen one. Rates are drawn as steps (each interval's rate held from its start to its
//! end); the figure on hover is the interval's.

use linerate_proto::Flow;

use super::axis::RateUnit;
use super::frame::{Heading, Key, Swatch};
use super::lines::{Line, Panel, Panels, Point, XAxis, draw};
use super::svg::{INK, Stroke, colour, dash};
use super::{Chart, run_name};
use crate::record::Outcome;
use crate::report::model::{Point as Interval, Report};

/// Which way data went, in words.
pub fn flow_words(flow: Flow) -> &'static str {
    match flow {
        Flow::ClientToServer => "client → server",
        Flow::ServerToClient => "server → client",
    }
}

/// The dash of the `k`-th direction of a run: solid, then dashed.
fn flow_dash(k: usize) -> Option<&'static str> {
    (k > 0).then_some("9 5")
}

/// A time in seconds to the hundredth, without trailing zeros: 0, 0.5, 1.25.
pub(super) fn seconds(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Steps through `intervals` in `unit`, and a hover point at each interval's middle.
pub(super) fn steps(
    intervals: &[Interval],
    unit: RateUnit,
    what: &str,
) -> (Vec<(f64, f64)>, Vec<Point>) {
    let mut path = Vec::new();
    let mut points = Vec::new();
    for i in intervals {
        let Some(bps) = i.bits_per_second else { continue };
        let y = unit.of(bps);
        path.push((i.start_seconds, y));
        path.push((i.end_seconds, y));
        let warm = if i.omitted { " (omitted warm-up)" } else { "" };
        points.push(Point {
            x: (i.start_seconds + i.end_seconds) / 2.0,
            y,
            hover: format!(
                "{what}, {}–{} s: {}{warm}",
                seconds(i.start_seconds),
                seconds(i.end_seconds),
                RateUnit::show(bps)
            ),
        });
    }
    (path, points)
}

/// The spans of omitted warm-up among `intervals`.
fn warm_up<'a>(intervals: impl Iterator<Item = &'a Interval>) -> Option<(f64, f64)> {
    let omitted: Vec<&Interval> = intervals.filter(|i| i.omitted).collect();
    let start = omitted.iter().map(|i| i.start_seconds).reduce(f64::min)?;
    Some((start, omitted.iter().map(|i| i.end_seconds).fold(start, f64::max)))
}

/// The key of the shaded warm-up.
fn warm_up_key() -> Key {
    Key { label: "omitted warm-up (not counted)".into(), swatch: Swatch::Block("#E6E6E6") }
}

/// Largest rate and latest end among `intervals`.
fn extent<'a>(intervals: impl Iterator<Item = &'a Interval>) -> (f64, f64) {
    intervals.fold((0.0, 0.0), |(y, x), i| {
        (y.max(i.bits_per_second.unwrap_or(0.0)), x.max(i.end_seconds))
    })
}

/// One run: each stream as the receiver measured it, and per direction their sum.
pub fn run_over_time(
    report: &Report,
    run: usize,
    prefix: &str,
    context: &[String],
) -> Option<Chart> {
    let mut series = report.received_series(run);
    series.sort_by_key(|s| (s.flow != Flow::ClientToServer, s.stream));
    let totals: Vec<_> = report.run_totals(run).into_iter().filter(|t| t.streams > 1).collect();
    let all = series.iter().flat_map(|s| &s.points).chain(totals.iter().flat_map(|t| &t.points));
    let (y_max, x_max) = extent(all);
    if x_max <= 0.0 {
        return None;
    }
    let unit = RateUnit::for_max(y_max);
    let name = run_name(report, &report.runs[run]);
    let flows: Vec<Flow> = report.run_totals(run).iter().map(|t| t.flow).collect();
    let k_of = |f: Flow| flows.iter().position(|x| *x == f).unwrap_or(0);
    // Up to eight streams get a colour each; more are thin grey lines under their sums.
    let coloured = series.len() <= 8;
    let (mut lines, mut keys) = (Vec::new(), Vec::new());
    for (i, s) in series.iter().enumerate() {
        let what = format!("stream {} ({})", s.stream, flow_words(s.flow));
        let (path, points) = steps(&s.points, unit, &what);
        let d = flow_dash(k_of(s.flow));
        let stroke = if coloured {
            Stroke { colour: colour(i), width: 2.0, dash: d }
        } else {
            Stroke { colour: "#999999", width: 1.0, dash: d }
        };
        if coloured {
            keys.push(Key { label: what, swatch: Swatch::Line(stroke.colour, 2.0, d) });
        }
        lines.push(Line { stroke, path, points });
    }
    if !coloured {
        let label = format!("each of the {} streams", series.len());
        keys.push(Key { label, swatch: Swatch::Line("#999999", 1.0, None) });
    }
    for t in &totals {
        let what = format!("sum of its {} streams ({})", t.streams, flow_words(t.flow));
        let (path, points) = steps(&t.points, unit, &what);
        let d = flow_dash(k_of(t.flow));
        keys.push(Key { label: what, swatch: Swatch::Line(INK, 3.0, d) });
        lines.push(Line { stroke: Stroke { colour: INK, width: 3.0, dash: d }, path, points });
    }
    let shaded: Vec<(f64, f64)> =
        warm_up(series.iter().flat_map(|s| &s.points)).into_iter().collect();
    if !shaded.is_empty() {
        keys.push(warm_up_key());
    }
    let title = format!("{prefix}Throughput over time of {name}");
    let sum = if totals.is_empty() { "" } else { ", with their sum as the thick black line" };
    let caption = format!(
        "Received throughput of each stream of {name}, interval by interval, as the receiving \
         end measured it{sum}."
    );
    let chart = Panels {
        heading: Heading { title: title.clone(), context: context.to_vec() },
        keys,
        panels: vec![Panel { shaded, ..Panel::of(lines) }],
        x: XAxis::Numeric(x_max),
        x_title: "time since the start of the test (s)".into(),
        y_max: unit.of(y_max),
        y_title: format!("received throughput ({})", unit.name),
    };
    Some(Chart { kind: "over-time", title, caption, svg: draw(&chart) })
}

/// Every run of tier `tier`: a panel per cell, a line per run and direction (its streams
/// summed), coloured by repetition, all panels on the same scales.
pub fn cells_over_time(
    report: &Report,
    tier: usize,
    prefix: &str,
    context: &[String],
) -> Option<Chart> {
    let runs: Vec<usize> =
        (0..report.runs.len()).filter(|&i| report.runs[i].tier == tier).collect();
    let totals: Vec<(usize, Vec<_>)> = runs.iter().map(|&i| (i, report.run_totals(i))).collect();
    let (y_max, x_max) = extent(totals.iter().flat_map(|(_, t)| t.iter().flat_map(|t| &t.points)));
    if x_max <= 0.0 {
        return None;
    }
    let unit = RateUnit::for_max(y_max);
    let (mut reps, mut two_ways, mut shaded) = (0, false, Vec::new());
    let mut panels = Vec::new();
    for cell in &report.tiers[tier].summary.cells {
        let mut lines = Vec::new();
        let mut unfinished = Vec::new();
        let of_cell = totals.iter().filter(|(i, _)| report.runs[*i].cell == cell.index);
        for (i, run_totals) in of_cell {
            let r = &report.runs[*i];
            reps = reps.max(r.repetition as usize);
            two_ways |= run_totals.len() > 1;
            let state = match &r.record.outcome {
                Outcome::Completed => "",
                Outcome::Interrupted => " (interrupted)",
                Outcome::Failed { .. } => " (failed)",
            };
            if !state.is_empty() {
                unfinished.push(format!("#{}{state}", r.repetition));
            }
            let rep = (r.repetition as usize).saturating_sub(1);
            for (k, t) in run_totals.iter().enumerate() {
                let what = format!("{}{state}, {}", run_name(report, r), flow_words(t.flow));
                let (path, points) = steps(&t.points, unit, &what);
                let stroke =
                    Stroke { colour: colour(rep), width: 2.0, dash: flow_dash(k).or(dash(rep)) };
                lines.push(Line { stroke, path, points });
            }
            shaded.extend(warm_up(run_totals.iter().flat_map(|t| &t.points)));
        }
        let title = match (lines.is_empty(), unfinished.is_empty()) {
            (true, _) => format!("{}: no run", cell.label),
            (false, true) => cell.label.clone(),
            (false, false) => format!("{}: {} did not complete", cell.label, unfinished.join(", ")),
        };
        panels.push(Panel { title, lines, shaded: Vec::new(), ranges: Vec::new(), y: None });
    }
    let span = shaded.iter().copied().reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)));
    let mut keys: Vec<Key> = (0..reps)
        .map(|r| Key {
            label: format!("repetition #{}", r + 1),
            swatch: Swatch::Line(colour(r), 2.0, dash(r)),
        })
        .collect();
    if two_ways {
        for (k, flow) in [Flow::ClientToServer, Flow::ServerToClient].into_iter().enumerate() {
            let label =
                format!("{} ({})", flow_words(flow), if k == 0 { "solid" } else { "dashed" });
            keys.push(Key { label, swatch: Swatch::Line(INK, 2.0, flow_dash(k)) });
        }
    }
    if let Some(span) = span {
        keys.push(warm_up_key());
        panels.iter_mut().for_each(|p| p.shaded = vec![span]);
    }
    let title = format!("{prefix}Throughput over time of every run, one panel per cell");
    let caption = "Every run's received throughput interval by interval (its streams summed, as \
                   the receiving end measured them), one panel per cell on a common scale and \
                   one colour per repetition."
        .to_string();
    let chart = Panels {
        heading: Heading { title: title.clone(), context: context.to_vec() },
        keys,
        panels,
        x: XAxis::Numeric(x_max),
        x_title: "time since the start of the run (s)".into(),
        y_max: unit.of(y_max),
        y_title: format!("received throughput ({})", unit.name),
    };
    Some(Chart { kind: "over-time", title, caption, svg: draw(&chart) })
}
