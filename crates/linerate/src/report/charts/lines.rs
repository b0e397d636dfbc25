//! Line charts: one panel, or small multiples (one panel per cell, two or three to a row, all
//! on the same scales so they compare at a glance), or panels stacked on one time axis each
//! with its own y axis (throughput above latency, as flent's RRUL plot). The x axis is numeric
//! (time), logarithmic (latency) or ordinal (an axis' values); every plotted point carries its
//! figure on hover, and each panel names its axes and their units. Must not choose what is plotted (`charts::time` and
//! `charts::cells` do).

use super::axis::Scale;
use super::frame::{
    Heading, Key, LABEL, TICK, TICK_GAP, bottom_axis, left_axis, left_axis_width, top,
};
use super::svg::{
    Anchor, Font, INK, PAD, Stroke, Svg, WIDTH, block, circle, segment, target, width, wrap,
};

/// One plotted point: where, and its exact figure.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// x in data units (an ordinal axis: the index of its value).
    pub x: f64,
    /// y in data units.
    pub y: f64,
    /// Shown on hover.
    pub hover: String,
}

/// One line.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    /// Colour, width and dash.
    pub stroke: Stroke<'static>,
    /// The path drawn, in data units (a step per interval for rates over time).
    pub path: Vec<(f64, f64)>,
    /// The points that carry figures.
    pub points: Vec<Point>,
}

/// One panel: its own title and lines, on the chart's shared scales.
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    /// What it shows (a cell's name).
    pub title: String,
    /// Its lines.
    pub lines: Vec<Line>,
    /// Spans of x shaded grey (an omitted warm-up).
    pub shaded: Vec<(f64, f64)>,
    /// Vertical ranges (error bars) and rules.
    pub ranges: Vec<Range>,
    /// Its own y axis (panels then stack in one column, their x axes aligned); None: the
    /// chart's.
    pub y: Option<YAxis>,
}

impl Panel {
    /// A panel of `lines` alone: no title, shading, ranges or axis of its own.
    pub fn of(lines: Vec<Line>) -> Panel {
        Panel { title: String::new(), lines, shaded: Vec::new(), ranges: Vec::new(), y: None }
    }
}

/// A panel's own y axis, from zero (or logarithmic).
#[derive(Debug, Clone, PartialEq)]
pub struct YAxis {
    /// The largest y.
    pub max: f64,
    /// Its title, with its unit.
    pub title: String,
    /// Logarithmic from this value up (latencies spanning decades); None: linear from zero.
    pub log_from: Option<f64>,
}

/// A vertical line at one x: an error bar from `lo` to `hi` with caps, or (no span) a rule
/// across the whole plot.
#[derive(Debug, Clone, PartialEq)]
pub struct Range {
    /// x in data units.
    pub x: f64,
    /// Shift right, in chart units (bars of two series at one x side by side).
    pub dx: f64,
    /// From `lo` to `hi` in data units; None spans the plot.
    pub span: Option<(f64, f64)>,
    /// Colour, width and dash.
    pub stroke: Stroke<'static>,
    /// Shown on hover.
    pub hover: String,
}

/// The x axis of every panel.
#[derive(Debug, Clone, PartialEq)]
pub enum XAxis {
    /// Numbers from zero to past this.
    Numeric(f64),
    /// These values, evenly spaced.
    Ordinal(Vec<String>),
    /// Whole numbers (a count) from zero to at least this, ticks at whole steps.
    Whole(usize),
    /// Logarithmic over the decades from the first value to the second (both > 0).
    Log(f64, f64),
}

/// A whole line chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Panels {
    /// Title and context.
    pub heading: Heading,
    /// What the lines are.
    pub keys: Vec<Key>,
    /// The panels, in reading order.
    pub panels: Vec<Panel>,
    /// The x axis.
    pub x: XAxis,
    /// Its title, with its unit.
    pub x_title: String,
    /// The largest y (the y axis runs from zero).
    pub y_max: f64,
    /// The y axis' title, with its unit.
    pub y_title: String,
}

/// Panel titles.
const PANEL: Font = Font::bold(14.0);
/// Space between panels.
const GAP: f64 = 36.0;
/// Lines with more points than this carry invisible hover targets instead of dots.
const DOTS: usize = 40;

/// Draws `chart` as an SVG document.
pub fn draw(chart: &Panels) -> String {
    let mut svg = Svg::default();
    let mut y = top(&mut svg, &chart.heading, &chart.keys);
    let stacked = chart.panels.iter().any(|p| p.y.is_some());
    let columns = match chart.panels.len() {
        _ if stacked => 1,
        0 | 1 => 1,
        2..=6 => 2,
        _ => 3,
    };
    let panel_w = (WIDTH - 2.0 * PAD - GAP * (columns - 1) as f64) / columns as f64;
    let plot_h = if stacked { 240.0 } else { [330.0, 190.0, 150.0][columns - 1] };
    let y_scale = |max: f64, p: Option<&Panel>| {
        let spans = chart.panels.iter().filter(|q| p.is_none_or(|p| std::ptr::eq(*q, p)));
        let y_max = spans.flat_map(|p| &p.ranges).filter_map(|r| Some(r.span?.1));
        Scale::fitting(y_max.fold(max, f64::max), plot_h, 14.0, |_| block(1, TICK))
    };
    let shared = y_scale(chart.y_max, None);
    let scales: Vec<(Scale, &str)> = chart
        .panels
        .iter()
        .map(|p| match &p.y {
            Some(YAxis { max, title, log_from: Some(lo) }) => {
                (Scale::log(*lo, *max, plot_h, 4.0, |_| block(1, TICK)), title.as_str())
            }
            Some(own) => (y_scale(own.max, Some(p)), own.title.as_str()),
            None => (shared.clone(), chart.y_title.as_str()),
        })
        .collect();
    // Every panel's plot starts at the same x, so stacked panels share their time axis.
    let left = scales.iter().map(|(s, _)| left_axis_width(s)).fold(0.0, f64::max);
    let mut scales = scales.iter();
    for row in chart.panels.chunks(columns) {
        let title_h = row
            .iter()
            .map(|p| block(wrap(&p.title, PANEL, panel_w).len(), PANEL))
            .fold(0.0, f64::max);
        let mut below = y;
        for (i, p) in row.iter().enumerate() {
            let x = PAD + i as f64 * (panel_w + GAP);
            let at = Place { x, top: y, width: panel_w, title_h, plot_h, left };
            let Some((scale, title)) = scales.next() else { break };
            below = below.max(panel(&mut svg, chart, p, (scale, title), at));
        }
        y = below + GAP;
    }
    svg.finish(y - GAP + PAD, &chart.heading.title)
}

/// Where a panel goes.
#[derive(Debug, Clone, Copy)]
struct Place {
    x: f64,
    top: f64,
    width: f64,
    title_h: f64,
    plot_h: f64,
    /// Room for the y axis' tick labels.
    left: f64,
}

/// Draws one panel; returns the y below it.
fn panel(
    svg: &mut Svg,
    chart: &Panels,
    p: &Panel,
    (y_scale, y_title): (&Scale, &str),
    at: Place,
) -> f64 {
    if !p.title.is_empty() {
        svg.lines((at.x, at.top), PANEL, Anchor::Start, INK, &wrap(&p.title, PANEL, at.width));
    }
    let mut y = at.top + at.title_h + if p.title.is_empty() { 0.0 } else { 6.0 };
    let y_title = wrap(y_title, LABEL, at.width);
    y += svg.lines((at.x, y), LABEL, Anchor::Start, INK, &y_title) + 4.0;
    let y0 = y + block(1, TICK) / 2.0;
    let y1 = y0 + at.plot_h;
    let x0 = at.x + at.left;
    let x_end = at.x + at.width;
    match &chart.x {
        XAxis::Numeric(max) => {
            // The last tick's label is centred on the plot's right edge: leave half of it.
            let probe = Scale::zero_to(*max, 10);
            let half = width(&probe.label(probe.hi), TICK) / 2.0 + 2.0;
            let x1 = x_end - half;
            let x_scale = Scale::fitting(*max, x1 - x0, 16.0, |l| width(l, TICK)).ending_at(*max);
            numeric(svg, chart, p, (y_scale, &x_scale), (x0, x1), (y0, y1))
        }
        XAxis::Log(lo, hi) => {
            let probe = Scale::log(*lo, *hi, at.width, 0.0, |_| 0.0);
            let x1 = x_end - width(&probe.label(probe.hi), TICK) / 2.0 - 2.0;
            let x_scale = Scale::log(*lo, *hi, x1 - x0, 16.0, |l| width(l, TICK));
            numeric(svg, chart, p, (y_scale, &x_scale), (x0, x1), (y0, y1))
        }
        XAxis::Whole(max) => {
            let x1 = x_end;
            let x_scale = Scale::whole(*max as f64, x1 - x0, 16.0, |l| width(l, TICK));
            numeric(svg, chart, p, (y_scale, &x_scale), (x0, x1), (y0, y1))
        }
        XAxis::Ordinal(values) => {
            let n = values.len().max(1) as f64;
            let slot = (x_end - x0) / n;
            let x = move |v: f64| x0 + slot * (v + 0.5);
            plot_area(svg, p, (x0, x_end), (y0, y1), x);
            left_axis(svg, y_scale, (x0, x_end), (y0, y1));
            draw_ranges(svg, p, (x, |v| y_scale.at(v, y1, y0)), (y0, y1));
            draw_lines(svg, p, x, |v| y_scale.at(v, y1, y0));
            ordinal_axis(svg, values, (x0, x_end), y1, &chart.x_title)
        }
    }
}

/// A panel on a numeric x axis: its plot, lines, ranges and both axes; returns the y below.
fn numeric(
    svg: &mut Svg,
    chart: &Panels,
    p: &Panel,
    (y_scale, x_scale): (&Scale, &Scale),
    (x0, x1): (f64, f64),
    (y0, y1): (f64, f64),
) -> f64 {
    let x = |v| x_scale.at(v, x0, x1);
    let y = |v| y_scale.at(v, y1, y0);
    plot_area(svg, p, (x0, x1), (y0, y1), x);
    left_axis(svg, y_scale, (x0, x1), (y0, y1));
    // The axis (and its grid) first, so no grid line is drawn over an error bar.
    let below = bottom_axis(svg, x_scale, (x0, x1), (y0, y1), (&chart.x_title, true));
    draw_ranges(svg, p, (x, y), (y0, y1));
    draw_lines(svg, p, x, y);
    below
}

/// Error bars (with caps) and rules, each with its figure on hover.
fn draw_ranges(
    svg: &mut Svg,
    p: &Panel,
    (x, y): (impl Fn(f64) -> f64, impl Fn(f64) -> f64),
    (y0, y1): (f64, f64),
) {
    for r in &p.ranges {
        let at = x(r.x) + r.dx;
        let shapes = match r.span {
            None => vec![segment((at, y0), (at, y1), r.stroke)],
            Some((lo, hi)) => {
                let (lo, hi) = (y(lo).clamp(y0, y1), y(hi).clamp(y0, y1));
                let cap = Stroke::solid(r.stroke.colour, r.stroke.width.min(2.0));
                vec![
                    segment((at, lo), (at, hi), r.stroke),
                    segment((at - 5.0, lo), (at + 5.0, lo), cap),
                    segment((at - 5.0, hi), (at + 5.0, hi), cap),
                ]
            }
        };
        svg.mark(&r.hover, &shapes);
    }
}

/// The plot's background (class `plot`: no text may lie on it) and its shaded spans.
fn plot_area(
    svg: &mut Svg,
    p: &Panel,
    (x0, x1): (f64, f64),
    (y0, y1): (f64, f64),
    x: impl Fn(f64) -> f64,
) {
    svg.rect((x0, y0), (x1 - x0, y1 - y0), "#FFFFFF", "plot");
    for (a, b) in &p.shaded {
        let (a, b) = (x(*a).clamp(x0, x1), x(*b).clamp(x0, x1));
        svg.rect((a, y0), (b - a, y1 - y0), "#E6E6E6", "");
    }
}

fn draw_lines(svg: &mut Svg, p: &Panel, x: impl Fn(f64) -> f64, y: impl Fn(f64) -> f64) {
    for line in &p.lines {
        let path: Vec<(f64, f64)> = line.path.iter().map(|(a, b)| (x(*a), y(*b))).collect();
        svg.polyline(&path, line.stroke);
    }
    // Points after every line, so no line hides another's hover target.
    for line in &p.lines {
        let dots = line.points.len() <= DOTS;
        for pt in &line.points {
            let at = (x(pt.x), y(pt.y));
            let shape =
                if dots { circle(at, 3.5, line.stroke.colour, true) } else { target(at, 5.0) };
            svg.mark(&pt.hover, &[shape]);
        }
    }
}

/// The values of an ordinal axis under their slots (wrapped to the slot, cut if a word is
/// wider), the axis and its title; returns the y below it.
fn ordinal_axis(
    svg: &mut Svg,
    values: &[String],
    (x0, x1): (f64, f64),
    y1: f64,
    title: &str,
) -> f64 {
    let slot = (x1 - x0) / values.len().max(1) as f64;
    svg.line((x0, y1), (x1, y1), Stroke::solid(INK, 1.0));
    let mut deepest = 0.0f64;
    for (i, v) in values.iter().enumerate() {
        let lines = wrap(v, TICK, slot - 10.0);
        let mid = x0 + slot * (i as f64 + 0.5);
        deepest = deepest.max(svg.lines((mid, y1 + TICK_GAP), TICK, Anchor::Middle, INK, &lines));
    }
    let y = y1 + TICK_GAP + deepest + 6.0;
    let title = wrap(title, LABEL, x1 - x0);
    y + svg.lines(((x0 + x1) / 2.0, y), LABEL, Anchor::Middle, INK, &title)
}
