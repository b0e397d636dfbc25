//! A request/response run over time: above, its transactions per second interval by interval
//! (every stream's summed); below, on the same time axis, each stream's 99th percentile per
//! interval (up to eight streams, a colour each) and the largest latency of any stream (black),
//! on a logarithmic axis since they lie decades apart:
//! a stall shows as a dip above and a spike below at one moment. Per-stream percentiles are
//! drawn as they are: a percentile of several streams together cannot be had from theirs.
//! Chooses and draws; computes no statistic.

use super::frame::{Heading, Key, Swatch};
use super::latency::{LatencyUnit, stacked_over_time};
use super::lines::{Line, Point, YAxis};
use super::svg::{INK, Stroke, colour};
use super::time::seconds;
use super::{Chart, run_name};
use crate::report::model::{Report, RrTotal};
use crate::report::words::lat;

/// Steps of `value` over intervals from `start` to `end`, with a hover figure at each middle.
fn steps<T>(
    of: &[T],
    at: impl Fn(&T) -> (f64, f64, Option<f64>),
    hover: impl Fn(&T, f64, f64) -> String,
) -> (Vec<(f64, f64)>, Vec<Point>) {
    let (mut path, mut points) = (Vec::new(), Vec::new());
    for t in of {
        let (a, b, v) = at(t);
        let Some(y) = v else { continue };
        path.extend([(a, y), (b, y)]);
        points.push(Point { x: (a + b) / 2.0, y, hover: hover(t, a, b) });
    }
    (path, points)
}

/// The transactions per second line and its axis.
fn rate_line(totals: &[RrTotal], keys: &mut Vec<Key>) -> (Line, YAxis) {
    let max = totals.iter().filter_map(|t| t.per_second).fold(0.0, f64::max);
    let (path, points) = steps(
        totals,
        |t| (t.start_seconds, t.end_seconds, t.per_second),
        |t, a, b| {
            let rate = t.per_second.map_or("n/a".into(), |r| format!("{r:.0}"));
            let warm = if t.omitted { " (omitted warm-up)" } else { "" };
            format!("{}–{} s: {rate} transactions/s{warm}", seconds(a), seconds(b))
        },
    );
    let stroke = Stroke::solid(colour(0), 2.5);
    let label = "transactions per second, all streams".to_string();
    keys.push(Key { label, swatch: Swatch::Line(stroke.colour, 2.5, None) });
    let axis = YAxis { max, title: "transactions per second".into(), log_from: None };
    (Line { stroke, path, points }, axis)
}

/// Each stream's p99 per interval (up to eight) and the interval's largest latency.
fn latency_lines(
    report: &Report,
    run: usize,
    totals: &[RrTotal],
    keys: &mut Vec<Key>,
) -> Option<(Vec<Line>, YAxis)> {
    let max = totals.iter().filter_map(|t| t.max_ns).max()?;
    let unit = LatencyUnit::around(max as f64);
    let mut lines = Vec::new();
    let streams = report.rr_series(run);
    for (k, s) in streams.iter().enumerate().filter(|_| streams.len() <= 8) {
        let what = format!("stream {}: p99", s.stream);
        let (path, points) = steps(
            &s.points,
            |p| (p.start_seconds, p.end_seconds, p.rr.and_then(|r| r.p99_ns).map(|v| unit.of(v))),
            |p, a, b| {
                format!(
                    "{what}, {}–{} s: {}",
                    seconds(a),
                    seconds(b),
                    lat(p.rr.and_then(|r| r.p99_ns))
                )
            },
        );
        let stroke = Stroke::solid(colour(k + 2), 2.0);
        keys.push(Key { label: what.clone(), swatch: Swatch::Line(stroke.colour, 2.0, None) });
        lines.push(Line { stroke, path, points });
    }
    let (path, points) = steps(
        totals,
        |t| (t.start_seconds, t.end_seconds, t.max_ns.map(|v| unit.of(v))),
        |t, a, b| format!("slowest, {}–{} s: {}", seconds(a), seconds(b), lat(t.max_ns)),
    );
    let stroke = Stroke { colour: INK, width: 1.5, dash: Some("9 5") };
    let label = "slowest transaction of any stream".to_string();
    keys.push(Key { label, swatch: Swatch::Line(INK, 1.5, stroke.dash) });
    lines.push(Line { stroke, path, points });
    // Percentiles and the slowest transaction lie decades apart: a logarithmic axis.
    let least = lines.iter().flat_map(|l| &l.points).map(|p| p.y).fold(f64::MAX, f64::min);
    let title = format!("latency ({}, logarithmic scale)", unit.1);
    Some((lines, YAxis { max: unit.of(max), title, log_from: Some(least) }))
}

/// Run `run`'s transactions and latency over time; None for a run without request/response
/// interval samples.
pub fn over_time(report: &Report, run: usize, prefix: &str, context: &[String]) -> Option<Chart> {
    let totals = report.transactions_over_time(run);
    let x_max = totals.iter().map(|t| t.end_seconds).fold(0.0, f64::max);
    if x_max <= 0.0 {
        return None;
    }
    let mut keys = Vec::new();
    let (rates, rate_axis) = rate_line(&totals, &mut keys);
    let (below, latency_axis) = latency_lines(report, run, &totals, &mut keys)?;
    let name = run_name(report, &report.runs[run]);
    let title = format!("{prefix}Transactions and latency over time of {name}");
    let caption = format!(
        "{name}'s transactions per second interval by interval, every stream's summed (above), and each stream's 99th percentile with the slowest transaction of any stream (below), on one time axis: a stall is a dip above and a spike below."
    );
    let heading = Heading { title: title.clone(), context: context.to_vec() };
    let panels = [("Transactions", vec![rates], rate_axis), ("Latency", below, latency_axis)];
    let svg = stacked_over_time(heading, keys, panels, x_max);
    Some(Chart { kind: "latency-over-time", title, caption, svg })
}
