//! A request/response matrix's cells (`matrix --rr`) on one chart: above, each cell's
//! transactions per second (the mean of its runs with the 95 % confidence interval, and the
//! runs' min–max dashed beside it); below, on the same cell axis, the median across its runs
//! of their p50 and p99 latency. Its throughput charts would show a bit rate of request
//! bytes, so this chart takes their place. Chooses and draws; computes no statistic.

use super::Chart;
use super::frame::{Heading, Key, Swatch};
use super::latency::LatencyUnit;
use super::lines::{Line, Panel, Panels, Point, Range, XAxis, YAxis, draw};
use super::svg::{Stroke, colour};
use crate::report::words::lat;
use crate::stats::matrix::CellSummary;

/// The transactions per second of every cell: the means joined by a line, their intervals
/// and min–max as bars.
fn rates(cells: &[CellSummary], keys: &mut Vec<Key>) -> Option<(Line, Vec<Range>, f64)> {
    let c = colour(0);
    let (mut points, mut ranges, mut max) = (Vec::new(), Vec::new(), 0.0f64);
    for (i, cell) in cells.iter().enumerate() {
        let Some(s) = cell.latency.as_ref().and_then(|l| l.transactions_per_second.as_ref()) else {
            continue;
        };
        let (x, label) = (i as f64, &cell.label);
        max = max.max(s.max);
        let hover = format!("{label}: {:.0} transactions/s, the mean of {} run(s)", s.mean, s.n);
        points.push(Point { x, y: s.mean, hover });
        if let Some((lo, hi)) = s.ci95 {
            let hover = format!("{label}: 95% CI of the mean {lo:.0}–{hi:.0} transactions/s");
            let stroke = Stroke::solid(c, 2.5);
            ranges.push(Range { x, dx: 0.0, span: Some((lo, hi)), stroke, hover });
        }
        let hover = format!("{label}: min–max of the {} run(s) {:.0}–{:.0}", s.n, s.min, s.max);
        let stroke = Stroke { colour: c, width: 1.2, dash: Some("3 2") };
        ranges.push(Range { x, dx: 7.0, span: Some((s.min, s.max)), stroke, hover });
    }
    if points.is_empty() {
        return None;
    }
    keys.push(Key { label: "mean transactions/s".into(), swatch: Swatch::Dot(c) });
    keys.push(Key { label: "95% CI of the mean".into(), swatch: Swatch::Line(c, 2.5, None) });
    let label = "min–max of the runs".into();
    keys.push(Key { label, swatch: Swatch::Line(c, 1.2, Some("3 2")) });
    let path = points.iter().map(|p| (p.x, p.y)).collect();
    Some((Line { stroke: Stroke::solid(c, 2.0), path, points }, ranges, max))
}

/// The median across runs of each cell's p50 and p99, a line each.
fn latencies(cells: &[CellSummary], keys: &mut Vec<Key>) -> Option<(Vec<Line>, YAxis)> {
    type Pick = fn(&crate::stats::matrix_latency::CellLatency) -> Option<u64>;
    let picks: [(&str, Pick, usize); 2] = [("p50", |l| l.p50_ns, 2), ("p99", |l| l.p99_ns, 3)];
    let all = cells.iter().filter_map(|c| c.latency.as_ref());
    let max = all.flat_map(|l| [l.p50_ns, l.p99_ns]).flatten().max()?;
    let unit = LatencyUnit::around(max as f64);
    let mut lines = Vec::new();
    for (name, pick, k) in picks {
        let points: Vec<Point> = cells
            .iter()
            .enumerate()
            .filter_map(|(i, c)| {
                let ns = pick(c.latency.as_ref()?)?;
                let hover = format!("{}: {name} {} (median of its runs)", c.label, lat(Some(ns)));
                Some(Point { x: i as f64, y: unit.of(ns), hover })
            })
            .collect();
        let stroke = Stroke::solid(colour(k), 2.5);
        let label = format!("{name} latency (median of the runs' {name})");
        keys.push(Key { label, swatch: Swatch::Line(stroke.colour, 2.5, None) });
        lines.push(Line { stroke, path: points.iter().map(|p| (p.x, p.y)).collect(), points });
    }
    let title = format!("latency ({})", unit.1);
    Some((lines, YAxis { max: unit.of(max), title, log_from: None }))
}

/// The chart of a request/response tier's cells; None without a request/response cell.
pub fn cells(cells: &[CellSummary], prefix: &str, context: &[String]) -> Option<Chart> {
    let mut keys = Vec::new();
    let (line, ranges, max) = rates(cells, &mut keys)?;
    let (below, latency_axis) = latencies(cells, &mut keys)?;
    let rate_axis = YAxis { max, title: "transactions per second".into(), log_from: None };
    let top =
        Panel { title: "Transactions".into(), ranges, y: Some(rate_axis), ..Panel::of(vec![line]) };
    let bottom = Panel { title: "Latency".into(), y: Some(latency_axis), ..Panel::of(below) };
    let title = format!("{prefix}Transactions per second and latency per cell");
    let caption = "Each cell's transactions per second over its runs (the dot is the mean, the solid bar its 95% confidence interval, the dashed bar the runs' min–max) above the median across its runs of their p50 and p99 latency, on one cell axis.".to_string();
    let chart = Panels {
        heading: Heading { title: title.clone(), context: context.to_vec() },
        keys,
        panels: vec![top, bottom],
        x: XAxis::Ordinal(cells.iter().map(|c| c.label.clone()).collect()),
        x_title: "cell".into(),
        y_max: 0.0,
        y_title: String::new(),
    };
    Some(Chart { kind: "latency-cells", title, caption, svg: draw(&chart) })
}
