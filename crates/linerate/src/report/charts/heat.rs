//! A mesh's pair × pair heat map: a row per agent that sent, a column per agent that received,
//! each cell the pair's mean received rate written out and shaded on one scale from zero to
//! the fastest pair (darker is faster), with its 95 % interval and runs on hover. The diagonal
//! (an agent and itself) is not a pair; a pair without a completed run says n/a. Rows and
//! columns keep the agents' order, so a zone's agents sit together when they were listed so.

use super::Chart;
use super::frame::{Heading, LABEL, TICK, top};
use super::svg::{Anchor, Font, INK, MUTED, PAD, Svg, WIDTH, truncate, width};
use crate::stats::mesh::MeshSummary;
use crate::units::format_bits_per_second;

/// Height of a row of cells.
const ROW: f64 = 34.0;
/// The lightest and darkest shade (a sequential blue, readable by colour-blind eyes).
const LIGHT: (f64, f64, f64) = (239.0, 243.0, 255.0);
const DARK: (f64, f64, f64) = (8.0, 69.0, 148.0);

/// The shade of `share` (0–1) of the fastest pair.
fn shade(share: f64) -> String {
    let s = share.clamp(0.0, 1.0);
    let mix = |a: f64, b: f64| (a + (b - a) * s).round() as u8;
    format!("#{:02X}{:02X}{:02X}", mix(LIGHT.0, DARK.0), mix(LIGHT.1, DARK.1), mix(LIGHT.2, DARK.2))
}

/// The heat map of a mesh, or None when it has fewer than two agents.
pub fn heat_map(m: &MeshSummary, context: &[String]) -> Option<Chart> {
    let n = m.agents.len();
    if n < 2 {
        return None;
    }
    let mut grid: Vec<Vec<Option<usize>>> = vec![vec![None; n]; n];
    for (i, p) in m.pairs.iter().enumerate() {
        if p.from < n && p.to < n {
            grid[p.from][p.to] = Some(i);
        }
    }
    let mean = |i: usize| m.cells.get(i).and_then(|c| c.bits_per_second.as_ref()).map(|s| s.mean);
    let fastest = (0..m.cells.len()).filter_map(mean).fold(0.0, f64::max);
    let pairs =
        crate::stats::matrix::MatrixSummary { cells: m.cells.clone(), findings: Vec::new() };
    let unit = crate::report::table::RateUnit::of([&pairs], []);
    let value_font = Font::regular(13.0);
    let name_w = m.agents.iter().map(|a| width(&a.label, LABEL)).fold(0.0, f64::max);
    let label_w = name_w.min(WIDTH * 0.3) + 10.0;
    let x0 = PAD + label_w;
    let col = (WIDTH - PAD - x0) / n as f64;
    // Each figure with its own unit where the columns are wide enough, else all in one.
    let fits = (0..m.cells.len())
        .filter_map(mean)
        .all(|v| width(&format_bits_per_second(v), value_font) <= col - 6.0);
    let figure = |v: f64| if fits { format_bits_per_second(v) } else { unit.one(v) };
    let in_unit = if fits { String::new() } else { format!(" ({})", unit.name) };
    let mut svg = Svg::default();
    let heading = Heading {
        title: format!("Received throughput per pair{in_unit}: row sends, column receives"),
        context: context.to_vec(),
    };
    let mut y = top(&mut svg, &heading, &[]);
    // Column headings: the receiving agents, truncated to their column.
    svg.text((x0, y), TICK, Anchor::Start, MUTED, "receives →");
    y += TICK.line() + 2.0;
    for (j, a) in m.agents.iter().enumerate() {
        let x = x0 + col * (j as f64 + 0.5);
        svg.text((x, y), TICK, Anchor::Middle, INK, &truncate(&a.label, TICK, col - 4.0));
    }
    y += TICK.line() + 6.0;
    for (i, from) in m.agents.iter().enumerate() {
        let row_top = y + ROW * i as f64;
        let text_top = row_top + (ROW - 1.17 * LABEL.size) / 2.0;
        svg.text(
            (PAD, text_top),
            LABEL,
            Anchor::Start,
            INK,
            &truncate(&from.label, LABEL, label_w - 10.0),
        );
        for (j, to) in m.agents.iter().enumerate() {
            let x = x0 + col * j as f64;
            let (fill, text, ink, hover) = match grid[i][j] {
                _ if i == j => (
                    "#F2F2F2".to_string(),
                    "—".to_string(),
                    MUTED,
                    format!("{}: itself, not a pair", from.label),
                ),
                None => (
                    "#FFFFFF".to_string(),
                    "".to_string(),
                    MUTED,
                    format!("{} -> {}: not tested", from.label, to.label),
                ),
                Some(c) => match (mean(c), m.cells.get(c)) {
                    (Some(v), Some(cell)) => {
                        let share = if fastest > 0.0 { v / fastest } else { 0.0 };
                        let ci = cell.bits_per_second.as_ref().and_then(|s| s.ci95).map_or(
                            "no interval (one run)".into(),
                            |(lo, hi)| {
                                let (lo, hi) =
                                    (format_bits_per_second(lo), format_bits_per_second(hi));
                                format!("95 % interval {lo}–{hi}")
                            },
                        );
                        let ink = if share > 0.55 { "#FFFFFF" } else { INK };
                        let hover = format!(
                            "{}: mean {} ({ci}; {} completed runs)",
                            cell.label,
                            format_bits_per_second(v),
                            cell.runs
                        );
                        (shade(share), figure(v), ink, hover)
                    }
                    _ => (
                        "#FFFFFF".to_string(),
                        "n/a".to_string(),
                        MUTED,
                        format!("{} -> {}: no completed run", from.label, to.label),
                    ),
                },
            };
            let rect = super::svg::bar((x + 1.0, row_top + 1.0), (col - 2.0, ROW - 2.0), &fill);
            svg.mark(&hover, &[rect]);
            let shown = truncate(&text, value_font, col - 6.0);
            svg.text((x + col / 2.0, text_top), value_font, Anchor::Middle, ink, &shown);
        }
    }
    let height = y + ROW * n as f64 + PAD;
    Some(Chart {
        kind: "heat-map",
        title: heading.title.clone(),
        caption: "Each cell is one ordered pair's mean received throughput over its completed \
                  runs, shaded from zero (lightest) to the fastest pair (darkest); hover for its \
                  95 % interval and runs."
            .into(),
        svg: svg.finish(height, &heading.title),
    })
}
