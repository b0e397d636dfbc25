//! SVG charts of a report, drawn with plotters' SVG backend (no system fonts: text is SVG
//! `<text>` the viewer renders). Each chart says what it shows, when, where and how — a title
//! with the date, a second line with the hosts and settings — and both axes name their unit.
//!
//! Charts: throughput over time per stream, cells with min–max whiskers, throughput against
//! each varied axis (streams, window, length), CPU per Gbit/s, and per-flow fairness; and for
//! `compare`, two sets of cells on the same axes. Every value comes from the report model;
//! this module must not compute statistics, only choose and draw them.

use plotters::coord::ranged1d::SegmentValue;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use crate::plan::matrix::AxisValue;
use crate::report::model::{Report, ReportRun};
use crate::stats::campaign::TierSummary;
use crate::stats::matrix::CellSummary;

/// Chart size in pixels.
pub const SIZE: (u32, u32) = (900, 420);

/// One drawn chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    /// What it shows (also the `<figcaption>`).
    pub title: String,
    /// The `<svg>` element.
    pub svg: String,
}

type DrawResult<T> = Result<T, String>;

fn err<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// The two heading lines of every chart: `title — date` and `hosts; settings`.
#[derive(Debug, Clone, Copy)]
pub struct Heading<'a> {
    /// What the chart shows.
    pub title: &'a str,
    /// UTC date of the first run.
    pub date: &'a str,
    /// Where and how.
    pub context: &'a str,
}

/// Draws `body` under the heading into an SVG string.
fn svg(
    heading: Heading<'_>,
    body: impl FnOnce(&DrawingArea<SVGBackend<'_>, plotters::coord::Shift>) -> DrawResult<()>,
) -> DrawResult<String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (top, rest) = root.split_vertically(44);
        let line1 = format!("{} — {} UTC", heading.title, heading.date);
        top.draw_text(&line1, &("sans-serif", 17).into_font().color(&BLACK), (10, 4))
            .map_err(err)?;
        let context: String = heading.context.chars().take(150).collect();
        top.draw_text(&context, &("sans-serif", 12).into_font().color(&BLACK.mix(0.7)), (10, 26))
            .map_err(err)?;
        body(&rest)?;
        root.present().map_err(err)?;
    }
    Ok(out)
}

fn gbit(v: f64) -> f64 {
    v / 1e9
}

/// Top of a y axis holding `max`: a quarter more, so the legend (top right) stays clear of
/// the data; never empty.
fn top(max: f64) -> f64 {
    if max.is_finite() && max > 0.0 { max * 1.25 } else { 1.0 }
}

/// Throughput of every stream of `run` over time, as its receiving end measured it (the
/// sender's view where no receiver reported).
pub fn throughput_over_time(
    report: &Report,
    run_index: usize,
    heading: Heading<'_>,
) -> DrawResult<String> {
    let mut lines: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    let series: Vec<_> = report.series.iter().filter(|s| s.run == run_index).collect();
    for s in &series {
        let receiver_exists = series
            .iter()
            .any(|o| o.stream == s.stream && o.role == linerate_proto::StreamRole::Receiver);
        if receiver_exists && s.role != linerate_proto::StreamRole::Receiver {
            continue;
        }
        // A step per interval: the rate held from its start to its end.
        let points: Vec<(f64, f64)> = s
            .points
            .iter()
            .filter_map(|p| {
                let v = gbit(p.bits_per_second?);
                Some([(p.start_seconds, v), (p.end_seconds, v)])
            })
            .flatten()
            .collect();
        lines.push((format!("stream {} {} ({})", s.stream, s.flow.label(), s.end), points));
    }
    let x_max = lines.iter().flat_map(|l| &l.1).map(|p| p.0).fold(0.0, f64::max);
    let y_max = lines.iter().flat_map(|l| &l.1).map(|p| p.1).fold(0.0, f64::max);
    svg(heading, |area| {
        let mut chart = ChartBuilder::on(area)
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..top(x_max), 0.0..top(y_max))
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("time since the start of the test (s)")
            .y_desc("throughput (Gbit/s)")
            .draw()
            .map_err(err)?;
        for (i, (label, points)) in lines.into_iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            chart
                .draw_series(LineSeries::new(points, color.stroke_width(2)))
                .map_err(err)?
                .label(label)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color));
        }
        legend(&mut chart)
    })
}

/// Each cell's received throughput: median (dot) with a whisker from min to max; several
/// sets (tiers, or A and B of a comparison) on the same axes, a cell's sets next to each other.
pub fn cells_with_whiskers(
    sets: &[(&str, &[CellSummary])],
    heading: Heading<'_>,
) -> DrawResult<String> {
    let mut cells: Vec<String> = Vec::new();
    for c in sets.iter().flat_map(|(_, c)| c.iter()) {
        if !cells.contains(&c.label) {
            cells.push(c.label.clone());
        }
    }
    // (x label, set, figures), cell-major so a cell's sets stand side by side.
    let mut slots: Vec<Slot> = Vec::new();
    for label in &cells {
        for (k, (name, set)) in sets.iter().enumerate() {
            let figures = set
                .iter()
                .find(|c| c.label == *label)
                .and_then(|c| c.bits_per_second.as_ref())
                .map(|s| (gbit(s.min), gbit(s.median), gbit(s.max)));
            let x = if sets.len() > 1 { format!("{label} ({name})") } else { label.clone() };
            slots.push((x, k, figures));
        }
    }
    let y_max = slots.iter().filter_map(|s| Some(s.2?.2)).fold(0.0, f64::max);
    let n = slots.len().max(1) as u32;
    let names: Vec<String> = slots.iter().map(|s| s.0.clone()).collect();
    svg(heading, |area| {
        let mut chart = ChartBuilder::on(area)
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            // A segmented 0..=k axis has k + 1 segments.
            .build_cartesian_2d((0..n - 1).into_segmented(), 0.0..top(y_max))
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_labels(n as usize)
            .x_label_formatter(&|v| segment_label(&names, v))
            .x_desc("cell")
            .y_desc("received throughput (Gbit/s): median, min–max")
            .draw()
            .map_err(err)?;
        for (k, (name, _)) in sets.iter().enumerate() {
            let color = Palette99::pick(k).to_rgba();
            let bars: Vec<(u32, (f64, f64, f64))> = slots
                .iter()
                .enumerate()
                .filter(|(_, s)| s.1 == k)
                .filter_map(|(i, s)| Some((i as u32, s.2?)))
                .collect();
            chart
                .draw_series(bars.into_iter().map(|(x, (lo, mid, hi))| {
                    ErrorBar::new_vertical(
                        SegmentValue::CenterOf(x),
                        lo,
                        mid,
                        hi,
                        color.filled().stroke_width(2),
                        14,
                    )
                }))
                .map_err(err)?
                .label(*name)
                .legend(move |(x, y)| Circle::new((x + 8, y), 4, color.filled()));
        }
        legend(&mut chart)
    })
}

/// One whisker's place: its x label, its set, and (min, median, max) in Gbit/s.
type Slot = (String, usize, Option<(f64, f64, f64)>);

/// An axis a chart can be drawn against: its description and which values belong to it.
type Axis = (&'static str, fn(&AxisValue) -> bool);

/// The label of cell `x` on an axis where cell `i` sits at x = i; nothing between cells.
fn index_label(labels: &[String], x: f64) -> String {
    let i = x.round();
    if (x - i).abs() < 1e-6 && i >= 0.0 {
        labels.get(i as usize).cloned().unwrap_or_default()
    } else {
        String::new()
    }
}

/// The series' legend, top right.
fn legend<'a, 'b: 'a, X: Ranged, Y: Ranged>(
    chart: &mut ChartContext<'a, SVGBackend<'b>, Cartesian2d<X, Y>>,
) -> DrawResult<()> {
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)
}

/// A chart whose x axis holds `labels` at x = 0, 1, …, with its mesh drawn.
fn indexed_chart<'a, 'b>(
    area: &'a DrawingArea<SVGBackend<'b>, plotters::coord::Shift>,
    labels: &[String],
    x_desc: &str,
    y_desc: &str,
    y_max: f64,
) -> DrawResult<ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>> {
    let n = labels.len().max(1);
    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(-0.5..(n as f64 - 0.5), 0.0..top(y_max))
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_labels(n + 1)
        .x_label_formatter(&|x: &f64| index_label(labels, *x))
        .disable_x_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .draw()
        .map_err(err)?;
    Ok(chart)
}

/// The label of a segment's centre; nothing elsewhere.
fn segment_label(names: &[String], v: &SegmentValue<u32>) -> String {
    match v {
        SegmentValue::CenterOf(i) => names.get(*i as usize).cloned().unwrap_or_default(),
        _ => String::new(),
    }
}

/// Bars per cell, one colour per named series (a cell's bars side by side), e.g. the CPU of
/// each end per Gbit/s. Cell `i` is centred on x = i.
fn bars(
    labels: &[String],
    series: &[(&str, Vec<Option<f64>>)],
    (x_desc, y_desc): (&str, &str),
    y_max_floor: f64,
    heading: Heading<'_>,
) -> DrawResult<String> {
    let y_max =
        series.iter().flat_map(|s| s.1.iter().flatten()).fold(y_max_floor, |a, b| a.max(*b));
    let width = series.len().max(1) as f64;
    svg(heading, |area| {
        let mut chart = indexed_chart(area, labels, x_desc, y_desc, y_max)?;
        for (k, (name, values)) in series.iter().enumerate() {
            let color = Palette99::pick(k).to_rgba();
            let (lo, hi) = (-0.4 + 0.8 * k as f64 / width, -0.4 + 0.8 * (k as f64 + 1.0) / width);
            let rects: Vec<Rectangle<(f64, f64)>> = values
                .iter()
                .enumerate()
                .filter_map(|(i, v)| {
                    let x = i as f64;
                    Some(Rectangle::new([(x + lo, 0.0), (x + hi, (*v)?)], color.filled()))
                })
                .collect();
            chart.draw_series(rects).map_err(err)?.label(*name).legend(move |(x, y)| {
                Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled())
            });
        }
        legend(&mut chart)
    })
}

/// CPU of each end, in cores, per Gbit/s received (the cost of a gigabit per cell).
pub fn cpu_per_gbit(cells: &[CellSummary], heading: Heading<'_>) -> DrawResult<String> {
    let labels: Vec<String> = cells.iter().map(|c| c.label.clone()).collect();
    let per = |cpu: Option<f64>, c: &CellSummary| {
        let gbit = gbit(c.bits_per_second.as_ref()?.mean);
        (gbit > 0.0).then_some(cpu? / 100.0 / gbit)
    };
    let client: Vec<Option<f64>> = cells.iter().map(|c| per(c.client_cpu_percent, c)).collect();
    let server: Vec<Option<f64>> = cells.iter().map(|c| per(c.server_cpu_percent, c)).collect();
    bars(
        &labels,
        &[("client process", client), ("server process", server)],
        ("cell", "CPU (cores) per Gbit/s received"),
        0.0,
        heading,
    )
}

/// A campaign's tiers side by side: each tier's best cell against the theoretical TCP goodput
/// of the link stated for it (the seeds' "what each layer can carry" view).
pub fn tiers_vs_links(tiers: &[TierSummary], heading: Heading<'_>) -> DrawResult<String> {
    let labels: Vec<String> = tiers.iter().map(|t| t.name.clone()).collect();
    let best = tiers.iter().map(|t| t.best_bits_per_second.map(gbit)).collect();
    let link = tiers.iter().map(|t| t.link_goodput_bits_per_second.map(gbit)).collect();
    let desc = ("tier", "received throughput (Gbit/s)");
    bars(&labels, &[("best cell (mean)", best), ("link's TCP goodput", link)], desc, 0.0, heading)
}

/// Per-flow fairness: Jain's index of the streams' received rates per cell (1 = equal).
pub fn fairness(cells: &[CellSummary], heading: Heading<'_>) -> DrawResult<String> {
    let labels: Vec<String> = cells.iter().map(|c| c.label.clone()).collect();
    let values: Vec<Option<f64>> = cells.iter().map(|c| c.fairness).collect();
    bars(
        &labels,
        &[("Jain's index", values)],
        ("cell", "Jain's fairness index (1 = equal shares)"),
        1.0,
        heading,
    )
}

/// Per-stream received throughput of one run (the fairness of its flows, stream by stream).
pub fn per_stream(run: &ReportRun, heading: Heading<'_>) -> DrawResult<String> {
    let streams: Vec<_> = run.summary.streams.iter().collect();
    let labels: Vec<String> =
        streams.iter().map(|s| format!("stream {} {}", s.id, s.flow.label())).collect();
    let values: Vec<Option<f64>> = streams
        .iter()
        .map(|s| s.receiver.as_ref().and_then(|f| f.bits_per_second).map(gbit))
        .collect();
    let desc = ("stream", "received throughput (Gbit/s)");
    bars(&labels, &[("received", values)], desc, 0.0, heading)
}

/// Which axes a tier varied among streams, window and length, with the x label of each.
fn numeric_axes(tier: &TierSummary) -> Vec<Axis> {
    let all: [Axis; 3] = [
        ("parallel streams (-P)", |v| matches!(v, AxisValue::Parallel(_))),
        ("socket buffer / window (-w)", |v| matches!(v, AxisValue::Window(_))),
        ("write size / length (-l)", |v| matches!(v, AxisValue::Length(_))),
    ];
    all.into_iter()
        .filter(|(_, is)| {
            let mut seen: Vec<AxisValue> = Vec::new();
            for v in tier.summary.cells.iter().flat_map(|c| c.values.iter().filter(|v| is(v))) {
                if !seen.contains(v) {
                    seen.push(*v);
                }
            }
            seen.len() > 1
        })
        .collect()
}

/// Mean received throughput against one varied axis, one line per combination of the other
/// axes (the VMware paper's "throughput vs socket and message size").
pub fn throughput_vs_axis(
    tier: &TierSummary,
    axis: Axis,
    heading: Heading<'_>,
) -> DrawResult<String> {
    let (desc, is) = axis;
    let mut xs: Vec<AxisValue> = Vec::new();
    for v in tier.summary.cells.iter().flat_map(|c| c.values.iter().filter(|v| is(v))) {
        if !xs.contains(v) {
            xs.push(*v);
        }
    }
    let mut lines: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for c in &tier.summary.cells {
        let (Some(x), Some(s)) = (c.values.iter().find(|v| is(v)), &c.bits_per_second) else {
            continue;
        };
        let rest: Vec<String> = c.values.iter().filter(|v| !is(v)).map(AxisValue::label).collect();
        let name = if rest.is_empty() { "mean".to_string() } else { rest.join(" ") };
        let at = xs.iter().position(|v| v == x).unwrap_or(0) as f64;
        match lines.iter_mut().find(|l| l.0 == name) {
            Some(l) => l.1.push((at, gbit(s.mean))),
            None => lines.push((name, vec![(at, gbit(s.mean))])),
        }
    }
    let labels: Vec<String> = xs.iter().map(AxisValue::label).collect();
    let y_max = lines.iter().flat_map(|l| &l.1).map(|p| p.1).fold(0.0, f64::max);
    svg(heading, |area| {
        let y_desc = "mean received throughput (Gbit/s)";
        let mut chart = indexed_chart(area, &labels, desc, y_desc, y_max)?;
        for (k, (name, mut points)) in lines.into_iter().enumerate() {
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            let color = Palette99::pick(k).to_rgba();
            chart
                .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
                .map_err(err)?
                .label(name)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color));
            chart
                .draw_series(points.into_iter().map(|p| Circle::new(p, 4, color.filled())))
                .map_err(err)?;
        }
        legend(&mut chart)
    })
}

/// Every chart of a report, in reading order.
pub fn report_charts(report: &Report) -> Vec<Chart> {
    let date = report.date.clone().unwrap_or_else(|| "no date".into());
    let context = format!("{}; {}", report.hosts, report.settings);
    let mut out = Vec::new();
    let mut add = |title: String, drawn: DrawResult<String>| match drawn {
        Ok(svg) => out.push(Chart { title, svg }),
        Err(e) => {
            out.push(Chart { title: format!("{title}: not drawn ({e})"), svg: String::new() })
        }
    };
    for (t, tier) in report.tiers.iter().enumerate() {
        let prefix =
            if report.tiers.len() > 1 { format!("{}: ", tier.name) } else { String::new() };
        if let Some(run) = representative_run(report, t) {
            let r = &report.runs[run];
            let title = format!(
                "{prefix}throughput over time per stream ({} #{})",
                report.cell_label(r),
                r.repetition
            );
            add(
                title.clone(),
                throughput_over_time(
                    report,
                    run,
                    Heading { title: &title, date: &date, context: &context },
                ),
            );
            if r.summary.streams.len() > 1 && report.kind == crate::report::model::ReportKind::Run {
                let title = format!("{prefix}per-flow throughput");
                add(
                    title.clone(),
                    per_stream(r, Heading { title: &title, date: &date, context: &context }),
                );
            }
        }
        let cells = &tier.summary.cells[..];
        if report.kind != crate::report::model::ReportKind::Run {
            let title = format!("{prefix}cells: median and min–max of the runs");
            add(
                title.clone(),
                cells_with_whiskers(
                    &[(tier.name.as_str(), cells)],
                    Heading { title: &title, date: &date, context: &context },
                ),
            );
            for axis in numeric_axes(tier) {
                let title = format!("{prefix}throughput vs {}", axis.0);
                add(
                    title.clone(),
                    throughput_vs_axis(
                        tier,
                        axis,
                        Heading { title: &title, date: &date, context: &context },
                    ),
                );
            }
        }
        if cells.iter().any(|c| c.client_cpu_percent.is_some() || c.server_cpu_percent.is_some()) {
            let title = format!("{prefix}CPU per Gbit/s");
            add(
                title.clone(),
                cpu_per_gbit(cells, Heading { title: &title, date: &date, context: &context }),
            );
        }
        if cells.iter().any(|c| c.fairness.is_some())
            && report.kind != crate::report::model::ReportKind::Run
        {
            let title = format!("{prefix}per-flow fairness");
            add(
                title.clone(),
                fairness(cells, Heading { title: &title, date: &date, context: &context }),
            );
        }
    }
    if report.kind == crate::report::model::ReportKind::Campaign {
        let title = "campaign: best cell per tier against its link".to_string();
        let heading = Heading { title: &title, date: &date, context: &context };
        add(title.clone(), tiers_vs_links(&report.tiers, heading));
    }
    out
}

/// The run to show over time: of the tier's best cell, the run nearest its median; else the
/// tier's first run.
fn representative_run(report: &Report, tier: usize) -> Option<usize> {
    let t = &report.tiers[tier];
    let best = t.summary.cells.iter().find(|c| Some(&c.label) == t.best_cell.as_ref());
    let in_tier = |r: &&ReportRun| r.tier == tier;
    let pick = best.and_then(|c| {
        let median = c.bits_per_second.as_ref()?.median;
        report
            .runs
            .iter()
            .enumerate()
            .filter(|(_, r)| in_tier(r) && r.cell == c.index)
            .min_by(|a, b| {
                let d = |r: &ReportRun| {
                    (crate::stats::matrix::received_rate(&r.summary) - median).abs()
                };
                d(a.1).total_cmp(&d(b.1))
            })
            .map(|(i, _)| i)
    });
    pick.or_else(|| report.runs.iter().position(|r| r.tier == tier))
}
