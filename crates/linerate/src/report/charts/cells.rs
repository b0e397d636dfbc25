//! Charts of cells: each cell's median with min–max and single runs (one set, or A and B of a
//! comparison), mean throughput against a varied axis, CPU per Gbit/s, per-flow fairness on
//! its 0–1 scale, the streams of one run, and a campaign's tiers against their links. Each
//! written figure and hover text is the model's value in the chart's unit.

use super::axis::{RateUnit, Scale, sig3};
use super::frame::{Heading, Key, Swatch};
use super::lines::{Line, Panel, Panels, Point, XAxis};
use super::rows::{Entry, Mark, Row, Rows, draw};
use super::svg::{MUTED, Stroke, colour, dash};
use super::time::flow_words;
use super::{Chart, run_name};
use crate::plan::matrix::AxisValue;
use crate::record::End;
use crate::report::model::Report;
use crate::stats::campaign::TierSummary;
use crate::stats::matrix::CellSummary;

fn heading(title: &str, context: &[String]) -> Heading {
    Heading { title: title.to_string(), context: context.to_vec() }
}

/// `n completed run(s)`.
fn runs(n: usize) -> String {
    format!("{n} completed run{}", if n == 1 { "" } else { "s" })
}

/// Each cell of each set: the median as a square, a whisker from min to max, and each
/// completed run as a ring; a cell a set lacks is said to be missing there.
pub fn whiskers(sets: &[(&str, &[CellSummary])], title: &str, context: &[String]) -> Chart {
    let mut labels: Vec<&str> = Vec::new();
    for c in sets.iter().flat_map(|(_, cells)| cells.iter()) {
        if !labels.contains(&c.label.as_str()) {
            labels.push(&c.label);
        }
    }
    let max = sets
        .iter()
        .flat_map(|(_, cells)| cells.iter())
        .filter_map(|c| c.bits_per_second.as_ref().map(|s| s.max))
        .fold(0.0, f64::max);
    let unit = RateUnit::for_max(max);
    let many = sets.len() > 1;
    let rows = labels
        .iter()
        .map(|label| Row {
            label: label.to_string(),
            entries: sets
                .iter()
                .enumerate()
                .map(|(k, (name, cells))| {
                    let who = if many { format!("{name}, {label}") } else { label.to_string() };
                    let cell = cells.iter().find(|c| c.label == *label);
                    whisker(k, &who, cell, unit, many.then_some(*name))
                })
                .collect(),
        })
        .collect();
    let mut keys: Vec<Key> = sets
        .iter()
        .enumerate()
        .map(|(k, (name, _))| Key {
            label: if many {
                format!("{name}: median, min–max")
            } else {
                "median, min–max".into()
            },
            swatch: Swatch::Dot(colour(k)),
        })
        .collect();
    keys.push(Key { label: "a single run".into(), swatch: Swatch::Ring(MUTED) });
    let chart = Rows {
        heading: heading(title, context),
        keys,
        rows,
        scale: None,
        axis: format!("received throughput ({})", unit.name),
        category: "cell".into(),
        figures: format!("median (min–max), {}", unit.name),
        rules: Vec::new(),
    };
    let caption = "Received throughput of each cell over its completed runs: the square is the \
                   median, the whisker spans min to max and the rings are the single runs."
        .to_string();
    Chart { kind: "cells", title: title.to_string(), caption, svg: draw(&chart) }
}

/// One set's whisker in a row; `set` names the set when there are several.
fn whisker(
    k: usize,
    who: &str,
    cell: Option<&CellSummary>,
    unit: RateUnit,
    set: Option<&str>,
) -> Entry {
    let absent =
        |figure: String, hover: String| Entry { set: k, mark: Mark::Nothing, figure, hover };
    let Some(cell) = cell else {
        let side = set.map_or("this set".into(), |s| s.split(':').next().unwrap_or(s).to_string());
        return absent(format!("not in {side}"), format!("{who}: no such cell"));
    };
    let Some(s) = &cell.bits_per_second else {
        return absent("no completed run".into(), format!("{who}: no completed run"));
    };
    let n = cell.samples.len();
    let samples = cell
        .samples
        .iter()
        .enumerate()
        .map(|(i, v)| (unit.of(*v), format!("{who}: run {} of {n}: {}", i + 1, RateUnit::show(*v))))
        .collect();
    let side = set.map_or(String::new(), |s| format!("{} ", s.split(':').next().unwrap_or(s)));
    Entry {
        set: k,
        mark: Mark::Whisker {
            min: unit.of(s.min),
            median: unit.of(s.median),
            max: unit.of(s.max),
            samples,
        },
        figure: format!(
            "{side}{} ({}–{})",
            sig3(unit.of(s.median)),
            sig3(unit.of(s.min)),
            sig3(unit.of(s.max))
        ),
        hover: format!(
            "{who}: median {}, mean {}, min {}, max {} over {}",
            RateUnit::show(s.median),
            RateUnit::show(s.mean),
            RateUnit::show(s.min),
            RateUnit::show(s.max),
            runs(cell.runs)
        ),
    }
}

/// An axis a chart can be drawn against: its description and which values belong to it.
pub type Axis = (&'static str, fn(&AxisValue) -> bool);

/// The values of `axis` the tier's cells took, in order of first appearance.
fn values_of(tier: &TierSummary, is: fn(&AxisValue) -> bool) -> Vec<AxisValue> {
    let mut seen: Vec<AxisValue> = Vec::new();
    for v in tier.summary.cells.iter().flat_map(|c| c.values.iter().filter(|v| is(v))) {
        if !seen.contains(v) {
            seen.push(*v);
        }
    }
    seen
}

/// Which of streams, window and length the tier varied.
pub fn varied_axes(tier: &TierSummary) -> Vec<Axis> {
    let all: [Axis; 3] = [
        ("parallel streams (-P)", |v| matches!(v, AxisValue::Parallel(_))),
        ("socket buffer / window (-w)", |v| matches!(v, AxisValue::Window(_))),
        ("write size / length (-l)", |v| matches!(v, AxisValue::Length(_))),
    ];
    all.into_iter().filter(|(_, is)| values_of(tier, *is).len() > 1).collect()
}

/// Mean received throughput against one varied axis, a line per combination of the others.
pub fn versus(tier: &TierSummary, (desc, is): Axis, prefix: &str, context: &[String]) -> Chart {
    let xs = values_of(tier, is);
    let max = tier.summary.cells.iter().filter_map(|c| Some(c.bits_per_second.as_ref()?.mean));
    let unit = RateUnit::for_max(max.fold(0.0, f64::max));
    let mut named: Vec<(String, Vec<Point>)> = Vec::new();
    for c in &tier.summary.cells {
        let (Some(x), Some(s)) = (c.values.iter().find(|v| is(v)), &c.bits_per_second) else {
            continue;
        };
        let rest: Vec<String> = c.values.iter().filter(|v| !is(v)).map(AxisValue::label).collect();
        let name = if rest.is_empty() { "mean".to_string() } else { rest.join(" ") };
        let at = xs.iter().position(|v| v == x).unwrap_or(0) as f64;
        let hover = format!("{}: mean {} over {}", c.label, RateUnit::show(s.mean), runs(c.runs));
        let point = Point { x: at, y: unit.of(s.mean), hover };
        match named.iter_mut().find(|l| l.0 == name) {
            Some(l) => l.1.push(point),
            None => named.push((name, vec![point])),
        }
    }
    let (mut lines, mut keys) = (Vec::new(), Vec::new());
    for (k, (name, mut points)) in named.into_iter().enumerate() {
        points.sort_by(|a, b| a.x.total_cmp(&b.x));
        let stroke = Stroke { colour: colour(k), width: 2.5, dash: dash(k) };
        keys.push(Key { label: name, swatch: Swatch::Line(stroke.colour, 2.5, stroke.dash) });
        let path = points.iter().map(|p| (p.x, p.y)).collect();
        lines.push(Line { stroke, path, points });
    }
    let y_max = lines.iter().flat_map(|l| &l.points).map(|p| p.y).fold(0.0, f64::max);
    let title = format!("{prefix}Mean throughput against {desc}");
    let others = if keys.len() > 1 { ", one line per combination of the other axes" } else { "" };
    let chart = Panels {
        heading: heading(&title, context),
        keys,
        panels: vec![Panel::of(lines)],
        x: XAxis::Ordinal(xs.iter().map(AxisValue::label).collect()),
        x_title: desc.to_string(),
        y_max,
        y_title: format!("mean received throughput ({})", unit.name),
    };
    let caption = format!("Mean received throughput of each cell against {desc}{others}.");
    Chart { kind: "vs-axis", title, caption, svg: super::lines::draw(&chart) }
}

/// The legend of a chart with one set of bars.
fn bars_key(label: &str) -> Vec<Key> {
    vec![Key { label: label.to_string(), swatch: Swatch::Block(colour(0)) }]
}

/// Bars per cell, one set per (name, values) with its written figures.
fn bar_rows(labels: &[String], sets: &[Vec<(Option<f64>, String, String)>]) -> Vec<Row> {
    labels
        .iter()
        .enumerate()
        .map(|(i, label)| Row {
            label: label.clone(),
            entries: sets
                .iter()
                .enumerate()
                .map(|(k, set)| {
                    let (value, figure, hover) = set[i].clone();
                    Entry { set: k, mark: value.map_or(Mark::Nothing, Mark::Bar), figure, hover }
                })
                .collect(),
        })
        .collect()
}

/// The process CPU of each end, in cores, per Gbit/s received.
pub fn cpu_per_gbit(cells: &[CellSummary], prefix: &str, context: &[String]) -> Chart {
    let labels: Vec<String> = cells.iter().map(|c| c.label.clone()).collect();
    let set = |end: End, cpu: fn(&CellSummary) -> Option<f64>| -> Vec<_> {
        cells
            .iter()
            .map(|c| {
                let mean = c.bits_per_second.as_ref().map(|s| s.mean).filter(|m| *m > 0.0);
                match (cpu(c), mean) {
                    (Some(pct), Some(bps)) => {
                        let v = pct / 100.0 / (bps / 1e9);
                        let hover = format!(
                            "{}: the {end} process used {} % of a core at a mean {}: {} cores per Gbit/s",
                            c.label,
                            sig3(pct),
                            RateUnit::show(bps),
                            sig3(v)
                        );
                        (Some(v), format!("{end} {}", sig3(v)), hover)
                    }
                    _ => (None, format!("{end} n/a"), format!("{}: {end}: not measured", c.label)),
                }
            })
            .collect()
    };
    let sets =
        [set(End::Client, |c| c.client_cpu_percent), set(End::Server, |c| c.server_cpu_percent)];
    let title = format!("{prefix}CPU per Gbit/s received");
    let chart = Rows {
        heading: heading(&title, context),
        keys: ["client process", "server process"]
            .iter()
            .enumerate()
            .map(|(k, l)| Key { label: l.to_string(), swatch: Swatch::Block(colour(k)) })
            .collect(),
        rows: bar_rows(&labels, &sets),
        scale: None,
        axis: "CPU cores busy per Gbit/s received".into(),
        category: "cell".into(),
        figures: "cores per Gbit/s".into(),
        rules: Vec::new(),
    };
    let caption = "The CPU time each end's linerate process used per Gbit/s it carried, by cell \
                   (cores busy ÷ Gbit/s received; lower is cheaper)."
        .to_string();
    Chart { kind: "cpu", title, caption, svg: draw(&chart) }
}

/// Jain's fairness index of the streams' received rates per cell, on its 0–1 scale.
pub fn fairness(cells: &[CellSummary], prefix: &str, context: &[String]) -> Chart {
    let labels: Vec<String> = cells.iter().map(|c| c.label.clone()).collect();
    let set: Vec<_> = cells
        .iter()
        .map(|c| match (c.fairness, c.runs) {
            (Some(f), n) => (
                Some(f.clamp(0.0, 1.0)),
                sig3(f),
                format!("{}: Jain's index {} (mean over {})", c.label, sig3(f), runs(n)),
            ),
            (None, 0) => {
                (None, "n/a: no completed run".into(), format!("{}: no completed run", c.label))
            }
            (None, _) => (
                None,
                "n/a: one stream".into(),
                format!("{}: one stream per direction, so nothing to share: no index", c.label),
            ),
        })
        .collect();
    let title = format!("{prefix}Per-flow fairness");
    let chart = Rows {
        heading: heading(&title, context),
        keys: bars_key("Jain's index (mean over the runs)"),
        rows: bar_rows(&labels, &[set]),
        scale: Some(Scale::stepped(0.0, 0.2, 5)),
        axis: "Jain's fairness index (no unit; 1 = equal shares)".into(),
        category: "cell".into(),
        figures: "index".into(),
        rules: Vec::new(),
    };
    let caption = "How evenly each cell's streams shared the throughput, as Jain's index from \
                   0 to 1 (1 = equal shares; with n streams, 1/n = one stream took everything); \
                   a cell with one stream per direction has nothing to share and shows n/a."
        .to_string();
    Chart { kind: "fairness", title, caption, svg: draw(&chart) }
}

/// The received throughput of each stream of one run (none when it had one stream).
pub fn per_stream(report: &Report, run: usize, prefix: &str, context: &[String]) -> Option<Chart> {
    let r = &report.runs[run];
    let streams = &r.summary.streams;
    if streams.len() < 2 {
        return None;
    }
    let rate =
        |s: &crate::stats::StreamSummary| s.receiver.as_ref().and_then(|f| f.bits_per_second);
    let unit = RateUnit::for_max(streams.iter().filter_map(rate).fold(0.0, f64::max));
    let name = run_name(report, r);
    let labels: Vec<String> =
        streams.iter().map(|s| format!("stream {} ({})", s.id, flow_words(s.flow))).collect();
    let set: Vec<_> = streams
        .iter()
        .zip(&labels)
        .map(|(s, label)| match rate(s) {
            Some(v) => {
                (Some(unit.of(v)), sig3(unit.of(v)), format!("{label}: {}", RateUnit::show(v)))
            }
            None => {
                (None, "n/a: no receiver report".into(), format!("{label}: no receiver report"))
            }
        })
        .collect();
    let title = format!("{prefix}Throughput of each stream of {name}");
    let chart = Rows {
        heading: heading(&title, context),
        keys: bars_key("received over the whole test"),
        rows: bar_rows(&labels, &[set]),
        scale: None,
        axis: format!("received throughput ({})", unit.name),
        category: "stream".into(),
        figures: unit.name.to_string(),
        rules: Vec::new(),
    };
    let caption = format!(
        "Received throughput of each stream of {name} over the whole test; equal bars mean the \
         streams shared the path fairly."
    );
    Some(Chart { kind: "streams", title, caption, svg: draw(&chart) })
}

/// Each tier's best cell next to the theoretical TCP goodput of the link stated for it.
pub fn tiers_vs_links(tiers: &[TierSummary], context: &[String]) -> Chart {
    let labels: Vec<String> = tiers.iter().map(|t| t.name.clone()).collect();
    let max = tiers
        .iter()
        .flat_map(|t| [t.best_bits_per_second, t.link_goodput_bits_per_second])
        .flatten()
        .fold(0.0, f64::max);
    let unit = RateUnit::for_max(max);
    let best = tiers
        .iter()
        .map(|t| match (t.best_bits_per_second, &t.best_cell) {
            (Some(v), Some(cell)) => {
                let share = t.share_of_link_goodput.map_or(String::new(), |s| {
                    format!(" ({} % of the link's TCP goodput)", sig3(s * 100.0))
                });
                let hover =
                    format!("{}: best cell {cell}: mean {}{share}", t.name, RateUnit::show(v));
                (Some(unit.of(v)), format!("best {}", sig3(unit.of(v))), hover)
            }
            _ => (None, "best n/a".into(), format!("{}: no completed run", t.name)),
        })
        .collect();
    let link = tiers
        .iter()
        .map(|t| match t.link_goodput_bits_per_second {
            Some(v) => (
                Some(unit.of(v)),
                format!("link {}", sig3(unit.of(v))),
                format!(
                    "{}: the stated link carries at most {} of TCP payload",
                    t.name,
                    RateUnit::show(v)
                ),
            ),
            None => (None, "no link stated".into(), format!("{}: no link stated", t.name)),
        })
        .collect();
    let title = "Each tier's best cell against its link".to_string();
    let chart = Rows {
        heading: heading(&title, context),
        keys: vec![
            Key { label: "best cell (mean received)".into(), swatch: Swatch::Block(colour(0)) },
            Key {
                label: "the link's theoretical TCP goodput".into(),
                swatch: Swatch::Block(colour(1)),
            },
        ],
        rows: bar_rows(&labels, &[best, link]),
        scale: None,
        axis: format!("received throughput ({})", unit.name),
        category: "tier".into(),
        figures: unit.name.to_string(),
        rules: Vec::new(),
    };
    let caption = "Each tier's best cell (its mean received throughput) next to the theoretical \
                   TCP goodput of the link stated for the tier; a tier without a stated link \
                   shows its cell alone."
        .to_string();
    Chart { kind: "tiers", title, caption, svg: draw(&chart) }
}
