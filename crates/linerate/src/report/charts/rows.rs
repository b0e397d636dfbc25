//! Category charts laid out as rows: a label on the left, the plotted value(s) in the middle on
//! a shared value axis, and the exact figure written on the right — readable on paper, where
//! nothing hovers. However many categories, labels never collide: each row is as tall as its
//! label needs. Must not choose what is plotted (`charts::cells` does).

use super::axis::Scale;
use super::frame::{Heading, Key, LABEL, TICK, bottom_axis, top};
use super::svg::{
    Anchor, Font, INK, MUTED, PAD, Stroke, Svg, WIDTH, bar, block, circle, colour, segment,
    truncate, width, wrap,
};

/// How one value is drawn.
#[derive(Debug, Clone, PartialEq)]
pub enum Mark {
    /// A bar from zero.
    Bar(f64),
    /// A median with a whisker from min to max and the single samples (value, hover text).
    Whisker {
        /// Smallest sample.
        min: f64,
        /// Median.
        median: f64,
        /// Largest sample.
        max: f64,
        /// Each sample with its hover text.
        samples: Vec<(f64, String)>,
    },
    /// A mean with a bar of ± one standard deviation, a whisker from min to max and the single
    /// samples (value, hover text).
    MeanSd {
        /// Mean.
        mean: f64,
        /// Standard deviation (None: one sample).
        sd: Option<f64>,
        /// Smallest sample.
        min: f64,
        /// Largest sample.
        max: f64,
        /// Each sample with its hover text.
        samples: Vec<(f64, String)>,
    },
    /// Nothing to draw; the written figure says why.
    Nothing,
}

/// A vertical line across every row at one value (a reference such as a mean).
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    /// Where.
    pub value: f64,
    /// Its colour (dashed).
    pub colour: &'static str,
    /// The exact figure shown on hover.
    pub hover: String,
}

/// One set's value in a row (the sets are the legend's entries).
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Which set (its colour).
    pub set: usize,
    /// What is drawn.
    pub mark: Mark,
    /// The figure written right of the plot.
    pub figure: String,
    /// The exact figure shown on hover.
    pub hover: String,
}

/// One category.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Its name.
    pub label: String,
    /// One entry per set.
    pub entries: Vec<Entry>,
}

/// A whole rows chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Rows {
    /// Title and context.
    pub heading: Heading,
    /// The sets.
    pub keys: Vec<Key>,
    /// The categories.
    pub rows: Vec<Row>,
    /// A fixed value axis (e.g. 0–1 for an index); None fits one to the data.
    pub scale: Option<Scale>,
    /// The value axis' title, with its unit.
    pub axis: String,
    /// The heading of the label column.
    pub category: String,
    /// The heading of the written figures, with their unit.
    pub figures: String,
    /// Reference lines across the rows.
    pub rules: Vec<Rule>,
}

/// Height of one entry's line.
const SUB: f64 = 22.0;
/// Space above and below a row's content.
const ROW_PAD: f64 = 6.0;
/// The written figures.
const FIGURE: Font = TICK;
/// Column headings.
const HEAD: Font = Font::bold(13.0);

/// Draws `chart` as an SVG document.
pub fn draw(chart: &Rows) -> String {
    let mut svg = Svg::default();
    let mut y = top(&mut svg, &chart.heading, &chart.keys);
    let most = WIDTH * 0.3;
    let label_w = chart
        .rows
        .iter()
        .map(|r| width(&r.label, LABEL))
        .fold(width(&chart.category, HEAD), f64::max)
        .min(most);
    let figures = chart.rows.iter().flat_map(|r| &r.entries).map(|e| width(&e.figure, FIGURE));
    let figure_w = figures.fold(width(&chart.figures, HEAD), f64::max).min(most);
    let (x0, x1) = (PAD + label_w + 16.0, WIDTH - PAD - figure_w - 16.0);
    let max = chart.rows.iter().flat_map(|r| &r.entries).map(|e| reach(&e.mark));
    let max = max.chain(chart.rules.iter().map(|r| r.value)).fold(0.0, f64::max);
    let scale = chart
        .scale
        .clone()
        .unwrap_or_else(|| Scale::fitting(max, x1 - x0, 18.0, |l| width(l, TICK)));
    // Column headings.
    let heads = [(PAD, &chart.category, label_w), (x1 + 16.0, &chart.figures, figure_w)];
    let head_h = heads
        .iter()
        .map(|(x, text, w)| svg.lines((*x, y), HEAD, Anchor::Start, MUTED, &wrap(text, HEAD, *w)))
        .fold(0.0, f64::max);
    y += head_h + 8.0;
    let heights: Vec<f64> = chart.rows.iter().map(|r| row_height(r, label_w)).collect();
    let plot_h: f64 = heights.iter().sum::<f64>().max(SUB);
    svg.rect((x0, y), (x1 - x0, plot_h), "#FFFFFF", "plot");
    let mut row_top = y;
    for (i, h) in heights.iter().enumerate() {
        if i % 2 == 0 {
            svg.rect((PAD, row_top), (WIDTH - 2.0 * PAD, *h), "#F2F2F2", "");
        }
        row_top += h;
    }
    let bottom = y + plot_h;
    let below = bottom_axis(&mut svg, &scale, (x0, x1), (y, bottom), (&chart.axis, false));
    let mut row_top = y;
    for (row, h) in chart.rows.iter().zip(&heights) {
        let lines = wrap(&row.label, LABEL, label_w);
        let label_top = row_top + (h - block(lines.len(), LABEL)) / 2.0;
        svg.lines((PAD, label_top), LABEL, Anchor::Start, INK, &lines);
        let first = row_top + (h - SUB * row.entries.len() as f64) / 2.0;
        for (k, e) in row.entries.iter().enumerate() {
            let mid = first + SUB * (k as f64 + 0.5);
            draw_mark(&mut svg, e, &scale, (x0, x1), mid);
            let text = truncate(&e.figure, FIGURE, figure_w);
            svg.text((x1 + 16.0, mid - block(1, FIGURE) / 2.0), FIGURE, Anchor::Start, INK, &text);
        }
        row_top += h;
    }
    for rule in &chart.rules {
        let x = scale.at(rule.value.clamp(scale.lo, scale.hi), x0, x1);
        let stroke = Stroke { colour: rule.colour, width: 2.0, dash: Some("7 4") };
        svg.mark(&rule.hover, &[segment((x, y), (x, bottom), stroke)]);
    }
    svg.finish(below + PAD, &chart.heading.title)
}

/// How far right a mark reaches.
fn reach(m: &Mark) -> f64 {
    match m {
        Mark::Bar(v) => *v,
        Mark::Whisker { max, samples, .. } | Mark::MeanSd { max, samples, .. } => {
            samples.iter().map(|s| s.0).fold(*max, f64::max)
        }
        Mark::Nothing => 0.0,
    }
}

fn row_height(row: &Row, label_w: f64) -> f64 {
    let label = block(wrap(&row.label, LABEL, label_w).len(), LABEL);
    label.max(SUB * row.entries.len() as f64) + 2.0 * ROW_PAD
}

fn draw_mark(svg: &mut Svg, e: &Entry, scale: &Scale, (x0, x1): (f64, f64), mid: f64) {
    let x = |v: f64| scale.at(v.clamp(scale.lo, scale.hi), x0, x1);
    let c = colour(e.set);
    match &e.mark {
        Mark::Bar(v) => svg.mark(&e.hover, &[bar((x0, mid - 7.0), (x(*v) - x0, 14.0), c)]),
        Mark::Whisker { min, median, max, samples } => {
            let line = Stroke::solid(c, 2.5);
            let cap = |v: f64| segment((x(v), mid - 6.0), (x(v), mid + 6.0), line);
            let shapes = [
                segment((x(*min), mid), (x(*max), mid), line),
                cap(*min),
                cap(*max),
                bar((x(*median) - 5.5, mid - 5.5), (11.0, 11.0), c),
            ];
            svg.mark(&e.hover, &shapes);
            for (v, hover) in samples {
                svg.mark(hover, &[circle((x(*v), mid), 4.5, c, false)]);
            }
        }
        Mark::MeanSd { mean, sd, min, max, samples } => {
            let thin = Stroke::solid(c, 1.5);
            let cap = |v: f64| segment((x(v), mid - 5.0), (x(v), mid + 5.0), thin);
            let sd = sd.unwrap_or(0.0);
            let (lo, hi) = (x(mean - sd), x(mean + sd));
            let shapes = [
                segment((x(*min), mid), (x(*max), mid), thin),
                cap(*min),
                cap(*max),
                bar((lo, mid - 4.0), ((hi - lo).max(2.0), 8.0), c),
                bar((x(*mean) - 1.5, mid - 8.0), (3.0, 16.0), INK),
            ];
            svg.mark(&e.hover, &shapes);
            for (v, hover) in samples {
                svg.mark(hover, &[circle((x(*v), mid), 3.5, c, false)]);
            }
        }
        Mark::Nothing => {}
    }
}
