//! What every chart has around its data: the heading (what, when, where, how — wrapped, never
//! cut), the legend above the plot (never on the data), and the ticks and grid of a value
//! axis. Must not choose what is plotted.

use super::axis::Scale;
use super::svg::{Anchor, Font, GRID, INK, MUTED, PAD, Stroke, Svg, WIDTH, block, truncate, wrap};

/// The chart's title.
const TITLE: Font = Font::bold(18.0);
/// Its context lines.
const CONTEXT: Font = Font::regular(13.0);
/// Legend entries.
const LEGEND: Font = Font::regular(14.0);
/// Tick labels.
pub const TICK: Font = Font::regular(13.0);
/// Axis titles and category labels.
pub const LABEL: Font = Font::regular(14.0);
/// Distance between a tick label and its axis.
pub const TICK_GAP: f64 = 7.0;

/// What a chart shows (its title) and when, where and how (context lines).
#[derive(Debug, Clone, PartialEq)]
pub struct Heading {
    /// What it shows.
    pub title: String,
    /// When, where and how: date, hosts, settings.
    pub context: Vec<String>,
}

/// How a legend entry is drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Swatch {
    /// A line (a series over time or along an axis).
    Line(&'static str, f64, Option<&'static str>),
    /// A dot (a median).
    Dot(&'static str),
    /// A block (a bar, or a shaded span).
    Block(&'static str),
    /// A ring (a single run among others).
    Ring(&'static str),
}

/// One legend entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Key {
    /// What it names.
    pub label: String,
    /// How it looks on the chart.
    pub swatch: Swatch,
}

/// Draws the heading and the legend from the top; returns the y below them.
pub fn top(svg: &mut Svg, heading: &Heading, keys: &[Key]) -> f64 {
    let full = WIDTH - 2.0 * PAD;
    let mut y = PAD;
    y += svg.lines((PAD, y), TITLE, Anchor::Start, INK, &wrap(&heading.title, TITLE, full));
    for line in &heading.context {
        y += 4.0;
        y += svg.lines((PAD, y), CONTEXT, Anchor::Start, MUTED, &wrap(line, CONTEXT, full));
    }
    if keys.is_empty() {
        return y + 12.0;
    }
    y += 12.0;
    legend(svg, keys, y) + 14.0
}

/// The legend's entries left to right, wrapping to new rows; returns the y below it.
fn legend(svg: &mut Svg, keys: &[Key], top: f64) -> f64 {
    const SWATCH: f64 = 26.0;
    let (mut x, mut y) = (PAD, top);
    let row = LEGEND.line() + 2.0;
    for key in keys {
        let label = &truncate(&key.label, LEGEND, WIDTH - 2.0 * PAD - SWATCH - 6.0);
        let w = SWATCH + 6.0 + super::svg::width(label, LEGEND);
        if x > PAD && x + w > WIDTH - PAD {
            x = PAD;
            y += row;
        }
        let mid = y + block(1, LEGEND) / 2.0;
        match key.swatch {
            Swatch::Line(colour, width, dash) => {
                svg.line((x, mid), (x + SWATCH, mid), Stroke { colour, width, dash })
            }
            Swatch::Dot(colour) => {
                svg.line((x + 2.0, mid), (x + SWATCH - 2.0, mid), Stroke::solid(colour, 2.0));
                svg.rect((x + SWATCH / 2.0 - 5.0, mid - 5.0), (10.0, 10.0), colour, "");
            }
            Swatch::Block(colour) => svg.rect((x, mid - 7.0), (SWATCH, 14.0), colour, ""),
            Swatch::Ring(colour) => {
                svg.shape(&super::svg::circle((x + SWATCH / 2.0, mid), 4.5, colour, false))
            }
        }
        svg.text((x + SWATCH + 6.0, y), LEGEND, Anchor::Start, INK, label);
        x += w + 22.0;
    }
    y + block(1, LEGEND)
}

/// A horizontal value axis under a plot spanning `x` and `y` (top, bottom): grid lines up
/// the plot, tick labels below it and the axis title below them; returns the y below it.
/// Beside a left axis (`flush`), the first label starts at the corner instead of centring on
/// it, clear of the left axis' lowest label.
pub fn bottom_axis(
    svg: &mut Svg,
    scale: &Scale,
    (x0, x1): (f64, f64),
    (y0, y1): (f64, f64),
    (title, flush): (&str, bool),
) -> f64 {
    for (i, &t) in scale.ticks.iter().enumerate() {
        let x = scale.at(t, x0, x1);
        svg.line((x, y0), (x, y1), Stroke::solid(GRID, 1.0));
        let anchor = if flush && i == 0 && x <= x0 { Anchor::Start } else { Anchor::Middle };
        svg.text((x, y1 + TICK_GAP), TICK, anchor, INK, &scale.label(t));
    }
    svg.line((x0, y1), (x1, y1), Stroke::solid(INK, 1.0));
    let y = y1 + TICK_GAP + block(1, TICK) + 6.0;
    let lines = wrap(title, LABEL, x1 - x0);
    y + svg.lines(((x0 + x1) / 2.0, y), LABEL, Anchor::Middle, INK, &lines)
}

/// A vertical value axis left of a plot spanning `x` and `y` (top, bottom): grid lines
/// across the plot and tick labels to its left.
pub fn left_axis(svg: &mut Svg, scale: &Scale, (x0, x1): (f64, f64), (y0, y1): (f64, f64)) {
    for &t in &scale.ticks {
        let y = scale.at(t, y1, y0);
        svg.line((x0, y), (x1, y), Stroke::solid(GRID, 1.0));
        let top = y - block(1, TICK) / 2.0;
        svg.text((x0 - TICK_GAP, top), TICK, Anchor::End, INK, &scale.label(t));
    }
    svg.line((x0, y0), (x0, y1), Stroke::solid(INK, 1.0));
}

/// Room the tick labels of `scale` need left of a plot.
pub fn left_axis_width(scale: &Scale) -> f64 {
    let widest =
        scale.ticks.iter().map(|t| super::svg::width(&scale.label(*t), TICK)).fold(0.0, f64::max);
    widest + TICK_GAP
}
