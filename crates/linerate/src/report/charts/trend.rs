//! A trend's chart: every run of one series over time, the medians between its changes, and a
//! rule at each change. Must not find changes (`stats::trend` does).

use super::Chart;
use super::axis::RateUnit;
use super::frame::{Heading, Key, Swatch};
use super::lines::{Line, Panel, Panels, Point, Range, XAxis, draw};
use super::svg::{INK, Stroke, colour};
use crate::report::words::{change_sentence, series_name};
use crate::stats::trend::Series;
use crate::units::format_bits_per_second;
use crate::units::utc;

/// Every run of `s` over time, the medians of its stretches, and a rule at each change.
pub fn trend(s: &Series) -> Option<Chart> {
    let first = s.points.first()?.started_unix_ms;
    let last = s.points.last()?.started_unix_ms;
    let span_h = (last - first) as f64 / 3_600_000.0;
    let (per_ms, x_title) = if span_h > 72.0 {
        (86_400_000.0, "days since the first run")
    } else if span_h > 3.0 {
        (3_600_000.0, "hours since the first run")
    } else {
        (60_000.0, "minutes since the first run")
    };
    let x = |ms: u64| (ms - first) as f64 / per_ms;
    let max = s.points.iter().map(|p| p.bits_per_second).fold(0.0, f64::max);
    let unit = RateUnit::for_max(max);
    let runs = Line {
        stroke: Stroke { colour: colour(0), width: 1.5, dash: None },
        path: s.points.iter().map(|p| (x(p.started_unix_ms), unit.of(p.bits_per_second))).collect(),
        points: s
            .points
            .iter()
            .map(|p| Point {
                x: x(p.started_unix_ms),
                y: unit.of(p.bits_per_second),
                hover: format!(
                    "run {}, {} UTC: {}",
                    p.run,
                    utc(p.started_unix_ms),
                    format_bits_per_second(p.bits_per_second)
                ),
            })
            .collect(),
    };
    let mut lines = vec![runs];
    for g in &s.segments {
        let (a, b) = (&s.points[g.first], &s.points[g.first + g.count - 1]);
        let y = unit.of(g.median);
        lines.push(Line {
            stroke: Stroke { colour: INK, width: 2.5, dash: Some("6 4") },
            path: vec![(x(a.started_unix_ms), y), (x(b.started_unix_ms), y)],
            points: Vec::new(),
        });
    }
    let mut panel = Panel::of(lines);
    panel.ranges = s
        .changes
        .iter()
        .map(|c| Range {
            x: x(c.started_unix_ms),
            dx: 0.0,
            span: None,
            stroke: Stroke { colour: colour(1), width: 1.5, dash: None },
            hover: change_sentence(c),
        })
        .collect();
    let svg = draw(&Panels {
        heading: Heading {
            title: format!("{}: every run over time", series_name(&s.key)),
            context: vec![format!("from {} UTC to {} UTC", utc(first), utc(last))],
        },
        keys: vec![
            Key { label: "one run".into(), swatch: Swatch::Line(colour(0), 1.5, None) },
            Key {
                label: "median between changes".into(),
                swatch: Swatch::Line(INK, 2.5, Some("6 4")),
            },
            Key { label: "a change".into(), swatch: Swatch::Line(colour(1), 1.5, None) },
        ],
        panels: vec![panel],
        x: XAxis::Numeric(x(last).max(1e-9)),
        x_title: x_title.into(),
        y_max: unit.of(max),
        y_title: format!("received ({})", unit.name),
    });
    let caption = match s.changes.len() {
        0 => "Each dot is one run; the dashed line is the median: no change was found.".to_string(),
        n => format!(
            "Each dot is one run; dashed lines are the medians between changes, and the {n} \
             vertical rule(s) mark where a change was found."
        ),
    };
    Some(Chart { kind: "trend", title: series_name(&s.key), caption, svg })
}
