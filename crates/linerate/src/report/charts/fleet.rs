//! Charts of a fleet: how fairly the hosts shared (each host's rate with its own flows'
//! spread, against the hosts' mean) and, for `--scale`, the total against the number of hosts
//! with its 95 % intervals, min–max and where it stops rising. Every figure is the model's
//! (`stats::fleet`, `stats::scaling`) in the chart's unit; this module draws, it computes no
//! statistic.

use super::Chart;
use super::axis::{RateUnit, sig3};
use super::frame::{Heading, Key, Swatch};
use super::lines::{Line, Panel, Panels, Point, Range, XAxis};
use super::rows::{Entry, Mark, Row, Rows, Rule};
use super::svg::{INK, MUTED, Stroke, colour};
use crate::report::fleet::{flow_words, jain_text};
use crate::stats::fleet::{FleetDirection, HostFigures, Spread};
use crate::stats::scaling::{PLATEAU, ScalePoint, ScaleSummary};
use crate::units::count_of;

/// The dash of a reference line (the hosts' mean, where the total stops rising).
const RULE_DASH: &str = "7 4";

fn heading(title: &str, context: &[String]) -> Heading {
    Heading { title: title.to_string(), context: context.to_vec() }
}

/// A host's row: its rate (a bar, written with its share) and its flows (mean ± σ, min–max and
/// each flow).
fn host_row(d: &FleetDirection, h: &HostFigures, unit: RateUnit) -> Row {
    let verdict = h.limit_summary.as_deref().map_or("no verdict".into(), |v| format!("limit: {v}"));
    let counted = if h.whole_test {
        "over its whole test (no interval samples)"
    } else {
        "in the shared window"
    };
    let rate = Entry {
        set: 0,
        mark: Mark::Bar(unit.of(h.bits_per_second)),
        figure: format!("{} ({}%)", sig3(unit.of(h.bits_per_second)), sig3(h.share * 100.0)),
        hover: format!(
            "{}: {} {counted}, {}% of the total; {verdict}",
            h.label,
            RateUnit::show(h.bits_per_second),
            sig3(h.share * 100.0)
        ),
    };
    let flows = match Spread::of(&h.flows) {
        Some(s) => {
            let samples = h
                .flows
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    (
                        unit.of(*v),
                        format!("{}: flow {} of {}: {}", h.label, i + 1, s.n, RateUnit::show(*v)),
                    )
                })
                .collect();
            let sd = s.stddev.map_or(String::new(), |sd| format!(" ± {}", sig3(unit.of(sd))));
            let range = format!("{}–{}", sig3(unit.of(s.min)), sig3(unit.of(s.max)));
            let jain = jain_text(&s);
            Entry {
                set: 1,
                mark: Mark::MeanSd {
                    mean: unit.of(s.mean),
                    sd: s.stddev.map(|v| unit.of(v)),
                    min: unit.of(s.min),
                    max: unit.of(s.max),
                    samples,
                },
                figure: format!("flows {}{sd} ({range})", sig3(unit.of(s.mean))),
                hover: format!(
                    "{}: its {} flows: mean {}, σ {}, min–max {}–{}, Jain {jain}",
                    h.label,
                    s.n,
                    RateUnit::show(s.mean),
                    s.stddev.map_or("n/a (one flow)".into(), RateUnit::show),
                    RateUnit::show(s.min),
                    RateUnit::show(s.max),
                ),
            }
        }
        None => Entry {
            set: 1,
            mark: Mark::Nothing,
            figure: "flows n/a: none reported".into(),
            hover: format!("{}: no flow reported a rate", h.label),
        },
    };
    let outlier = d.outliers.iter().any(|o| o.label == h.label);
    let label = if outlier { format!("{} (outlier)", h.label) } else { h.label.clone() };
    Row { label, entries: vec![rate, flows] }
}

/// One direction's hosts: each one's rate and its flows' spread, against the hosts' mean.
pub fn fairness(d: &FleetDirection, context: &[String]) -> Chart {
    let max = d.hosts.iter().map(|h| h.bits_per_second).fold(0.0, f64::max);
    let unit = RateUnit::for_max(max);
    let rows = d.hosts.iter().map(|h| host_row(d, h, unit)).collect();
    let mut keys = vec![
        Key {
            label: "the host's rate (its flows' sum), share".into(),
            swatch: Swatch::Block(colour(0)),
        },
        Key {
            label: "its flows: mean (tick) ± σ (bar), min–max (whisker)".into(),
            swatch: Swatch::Dot(colour(1)),
        },
        Key { label: "a single flow".into(), swatch: Swatch::Ring(colour(1)) },
    ];
    let mut rules = Vec::new();
    if let Some(s) = &d.across_hosts {
        let sd = s.stddev.map_or("n/a (one host)".into(), RateUnit::show);
        let jain = jain_text(s);
        keys.push(Key {
            label: format!("mean of the hosts: {}", RateUnit::show(s.mean)),
            swatch: Swatch::Line(INK, 2.0, Some(RULE_DASH)),
        });
        rules.push(Rule {
            value: unit.of(s.mean),
            colour: INK,
            hover: format!(
                "mean of the {}: {}, σ {sd}, min–max {}–{}, Jain {jain}",
                hosts(s.n),
                RateUnit::show(s.mean),
                RateUnit::show(s.min),
                RateUnit::show(s.max)
            ),
        });
    }
    let title = format!("Fairness across hosts: data {}", flow_words(d.flow));
    let chart = Rows {
        heading: heading(&title, context),
        keys,
        rows,
        scale: None,
        axis: format!("received throughput ({})", unit.name),
        category: "host".into(),
        figures: format!("{}: host (share); flows mean ± σ (min–max)", unit.name),
        rules,
    };
    let caption = "Each host's received rate in the window every host shared (the bar, with its \
                   share of the total) and its own flows' mean ± σ (the thick bar), min–max (the \
                   whisker) and each flow (the rings), against the mean of the hosts (the dashed \
                   line): a host far from it got an unequal share."
        .to_string();
    Chart { kind: "fairness", title, caption, svg: super::rows::draw(&chart) }
}

/// `1 host`, `4 hosts`.
fn hosts(n: usize) -> String {
    count_of(n as u64, "host")
}

/// A point's hover text.
fn point_hover(what: &str, p: &ScalePoint) -> String {
    let Some(s) = &p.total else {
        return format!("{what}, {}: n/a (no run measured every host)", hosts(p.hosts));
    };
    let ci = s
        .ci95_half_width
        .map_or("no interval (one run)".into(), |h| format!("± {} (95% CI)", RateUnit::show(h)));
    let per_host = p.per_host_mean.map_or("n/a".into(), RateUnit::show);
    let jain = p.jain_mean.map_or("n/a (one host)".into(), |j| format!("{j:.3}"));
    format!(
        "{what}, {}: mean total {} {ci} over {} run(s), min–max {}–{}; per host {per_host}, \
         Jain {jain}",
        hosts(p.hosts),
        RateUnit::show(s.mean),
        s.n,
        RateUnit::show(s.min),
        RateUnit::show(s.max)
    )
}

/// The total against the number of hosts, one line per direction, with each host count's 95 %
/// interval and min–max, and where the total stops rising.
pub fn scaling(curve: &ScaleSummary, context: &[String]) -> Chart {
    let top = curve.directions.iter().flat_map(|d| &d.points).filter_map(|p| p.total.as_ref());
    let unit = RateUnit::for_max(
        top.map(|s| s.ci95.map_or(s.max, |c| c.1.max(s.max))).fold(0.0, f64::max),
    );
    let (mut lines, mut ranges, mut keys) = (Vec::new(), Vec::new(), Vec::new());
    for (k, d) in curve.directions.iter().enumerate() {
        let what = flow_words(d.flow);
        let c = colour(k);
        let mut points = Vec::new();
        for p in &d.points {
            let Some(s) = &p.total else { continue };
            let x = p.hosts as f64;
            points.push(Point { x, y: unit.of(s.mean), hover: point_hover(what, p) });
            if let Some((lo, hi)) = s.ci95 {
                ranges.push(Range {
                    x,
                    dx: 0.0,
                    span: Some((unit.of(lo), unit.of(hi))),
                    stroke: Stroke::solid(c, 2.5),
                    hover: format!(
                        "{what}, {}: 95% CI of the mean total {}–{}",
                        hosts(p.hosts),
                        RateUnit::show(lo),
                        RateUnit::show(hi)
                    ),
                });
            }
            ranges.push(Range {
                x,
                dx: 7.0,
                span: Some((unit.of(s.min), unit.of(s.max))),
                stroke: Stroke { colour: c, width: 1.2, dash: Some("3 2") },
                hover: format!(
                    "{what}, {}: min–max of the {} run(s) {}–{}",
                    hosts(p.hosts),
                    s.n,
                    RateUnit::show(s.min),
                    RateUnit::show(s.max)
                ),
            });
        }
        keys.push(Key {
            label: format!("{what}: mean total ± 95% CI"),
            swatch: Swatch::Line(c, 2.5, None),
        });
        if let (Some(at), false) = (d.stops_rising_at, d.still_rising) {
            let mean = d.points.iter().find(|p| p.hosts == at).and_then(|p| p.total.as_ref());
            ranges.push(Range {
                x: at as f64,
                dx: 0.0,
                span: None,
                stroke: Stroke { colour: c, width: 1.5, dash: Some(RULE_DASH) },
                hover: format!(
                    "{what}: the total stops rising at {} ({}), within {:.0}% of the highest \
                     mean",
                    hosts(at),
                    mean.map_or("n/a".into(), |s| RateUnit::show(s.mean)),
                    PLATEAU * 100.0
                ),
            });
            keys.push(Key {
                label: format!("{what}: stops rising at {}", hosts(at)),
                swatch: Swatch::Line(c, 1.5, Some(RULE_DASH)),
            });
        }
        let path = points.iter().map(|p| (p.x, p.y)).collect();
        lines.push(Line { stroke: Stroke::solid(c, 2.5), path, points });
    }
    keys.push(Key {
        label: "min–max of the runs".into(),
        swatch: Swatch::Line(MUTED, 1.2, Some("3 2")),
    });
    let most = curve.directions.iter().flat_map(|d| &d.points).map(|p| p.hosts).max();
    let y_max = lines.iter().flat_map(|l| &l.points).map(|p| p.y).fold(0.0, f64::max);
    let title = "Total throughput against the number of hosts".to_string();
    let chart = Panels {
        heading: heading(&title, context),
        keys,
        panels: vec![Panel { ranges, ..Panel::of(lines) }],
        x: XAxis::Whole(most.unwrap_or(1)),
        x_title: "hosts in the fleet (the first k targets)".into(),
        y_max,
        y_title: format!("total received throughput ({})", unit.name),
    };
    let caption = format!(
        "The fleet's total received throughput with the first k targets, for each k: the mean \
         over the runs (dots) with its 95% confidence interval (solid bar) and the runs' \
         min–max (dashed bar), and a dashed vertical line where the total stops rising (the \
         fewest hosts within {:.0}% of the highest mean).",
        PLATEAU * 100.0
    );
    Chart { kind: "scaling", title, caption, svg: super::lines::draw(&chart) }
}
