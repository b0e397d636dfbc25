//! `linerate report --trend HOST`: one target's stored results over time, in every format.
//! Each test against the target is a series; each series is a table of its stretches between
//! changes and a sentence per change ("run 26, 2026-11-26 22:15:07 UTC: 956 Mbit/s → 574
//! Mbit/s (−40.0 %), p = 0.001: a regression"); HTML adds a chart of every run over time with
//! the stretches' medians and the changes marked. The figures come from `stats::trend`.

use std::io::Write;

use serde::Serialize;

use crate::plan::ReportFormat;
use crate::report::csv::field;
use crate::report::style::Style;
use crate::report::table::Table;
use crate::report::words::{
    change_sentence, drift_sentence, fresh_sentence, html_escape, rate_words, series_name,
};
use crate::stats::trend::{Series, Trend};
use crate::units::format_bits_per_second;
use crate::units::utc;

/// Version of the `linerate.trend` JSON document (docs/JSON.md).
const TREND_SCHEMA_VERSION: u32 = 1;

/// Writes `trend` in `format`.
pub fn render(trend: &Trend, format: ReportFormat, out: &mut dyn Write) -> std::io::Result<()> {
    match format {
        ReportFormat::Text => write_document(Style::Text, trend, out),
        ReportFormat::Markdown => write_document(Style::Markdown, trend, out),
        ReportFormat::Csv(_) => write_csv(trend, out),
        ReportFormat::Json => {
            #[derive(Serialize)]
            struct Document<'a> {
                schema_version: u32,
                kind: &'static str,
                trend: &'a Trend,
            }
            let doc =
                Document { schema_version: TREND_SCHEMA_VERSION, kind: "linerate.trend", trend };
            serde_json::to_writer_pretty(&mut *out, &doc).map_err(std::io::Error::other)?;
            writeln!(out)
        }
        ReportFormat::Html => write_html(trend, out),
    }
}

/// The report's facts: target, span, series and method.
fn facts(t: &Trend) -> Vec<(&'static str, String)> {
    let runs: usize = t.series.iter().map(|s| s.points.len()).sum();
    let failed: usize = t.series.iter().map(|s| s.failed).sum();
    let span =
        t.since_unix_ms.map_or("every stored run".into(), |s| format!("since {} UTC", utc(s)));
    vec![
        ("Target", t.target.clone()),
        ("Span", span),
        (
            "Runs",
            format!(
                "{runs} completed in {} series, {failed} failed or interrupted",
                t.series.len()
            ),
        ),
        ("Method", method_words(t)),
    ]
}

/// How changes were found, in one sentence.
fn method_words(t: &Trend) -> String {
    let m = &t.method;
    format!(
        "binary segmentation, Mann–Whitney statistic, permutation test ({} permutations); a \
         change is reported when p ≤ {} and the median moved by at least {:.0} %, with at least \
         {} runs on each side; a drift by Mann–Kendall (p ≤ {}) with a Theil–Sen slope moving \
         at least {:.0} % over the runs and fitting better than steps; a fresh drop when the \
         last 1 or 2 runs are below every earlier run, {:.0} % below their median, and a \
         prediction test gives p ≤ {} (false alarms on a flat series, all three together: at \
         most 1 % in seeded tests)",
        m.permutations,
        m.alpha,
        m.min_change * 100.0,
        m.min_segment,
        m.alpha * crate::stats::drift::DRIFT_ALPHA_SHARE,
        m.min_change * 100.0,
        m.min_change * 100.0,
        m.alpha * crate::stats::drift::FRESH_ALPHA_SHARE
    )
}

/// A path figure's findings: "RTT: fresh rise: …", "retransmits: drift: …".
fn path_findings(s: &Series) -> Vec<String> {
    let mut out = Vec::new();
    for p in &s.path {
        let (name, unit): (&str, fn(f64) -> String) = match p.figure {
            "rtt_seconds" => ("RTT", |v| format!("{:.2} ms", v * 1e3)),
            "retransmits" => ("retransmits", |v| format!("{v:.0}")),
            _ => ("loss", |v| format!("{v:.2} %")),
        };
        out.extend(
            p.fresh_rise.iter().map(|f| format!("{name}: {}", fresh_sentence(f, RUNS, unit))),
        );
        out.extend(p.drift.iter().map(|d| format!("{name}: {}", drift_sentence(d, RUNS, unit))));
    }
    out
}

/// The words for a trend's points: one run, runs.
const RUNS: (&str, &str) = ("run", "runs");

/// What a series says when nothing changed, or its changes, drift and fresh drop.
fn findings(s: &Series) -> Vec<String> {
    let mut out: Vec<String> = s.changes.iter().map(change_sentence).collect();
    out.extend(s.drift.iter().map(|d| drift_sentence(d, RUNS, rate_words)));
    out.extend(s.fresh_drop.iter().map(|f| fresh_sentence(f, RUNS, rate_words)));
    out.extend(path_findings(s));
    if out.is_empty() {
        out.push(match s.points.len() {
            0 => "no completed run".into(),
            n if n < 10 => {
                format!("no change found: {n} runs are too few to find one (10 or more)")
            }
            n => format!("no change found in {n} runs"),
        });
    }
    if s.failed > 0 {
        out.push(format!("{} runs failed or were interrupted (not plotted)", s.failed));
    }
    out
}

/// The stretches between changes.
fn segment_table(s: &Series) -> Table {
    let mut t = Table::new(&["from (UTC)", "to (UTC)", ">runs", ">median", ">min", ">max"]);
    for g in &s.segments {
        let (a, b) = (&s.points[g.first], &s.points[g.first + g.count - 1]);
        t.rows.push(vec![
            utc(a.started_unix_ms),
            utc(b.started_unix_ms),
            g.count.to_string(),
            format_bits_per_second(g.median),
            format_bits_per_second(g.min),
            format_bits_per_second(g.max),
        ]);
    }
    t
}

fn write_document(style: Style, t: &Trend, out: &mut dyn Write) -> std::io::Result<()> {
    style.heading(1, &format!("linerate trend: {}", t.target), out)?;
    crate::report::sections::write_facts(style, &facts(t), out)?;
    if t.series.is_empty() {
        writeln!(out)?;
        return writeln!(
            out,
            "No stored throughput run against {} in this span: run `linerate client {}` (or \
             schedule it: `--every`, or the probe timer) to start one.",
            t.target, t.target
        );
    }
    for s in &t.series {
        writeln!(out)?;
        style.heading(2, &series_name(&s.key), out)?;
        if !s.segments.is_empty() {
            style.table(&segment_table(s), out)?;
        }
        style.list("Changes", &findings(s), out)?;
    }
    Ok(())
}

/// Columns of the trend CSV, in order (docs/CSV.md).
const CSV_COLUMNS: [&str; 14] = [
    "server",
    "protocol",
    "direction",
    "streams",
    "block_bytes",
    "window_bytes",
    "target_bits_per_second",
    "run",
    "started_utc",
    "started_unix_ms",
    "bits_per_second",
    "segment",
    "segment_median_bits_per_second",
    "change",
];

/// One row per completed run (CRLF-terminated, as every CSV of docs/CSV.md); `change` is 1
/// on the first run after a change.
fn write_csv(t: &Trend, out: &mut dyn Write) -> std::io::Result<()> {
    write!(out, "{}\r\n", CSV_COLUMNS.join(","))?;
    for s in &t.series {
        let k = &s.key;
        for (seg_no, g) in s.segments.iter().enumerate() {
            for (i, p) in s.points[g.first..g.first + g.count].iter().enumerate() {
                let change = u8::from(i == 0 && seg_no > 0);
                write!(
                    out,
                    "{},{},{},{},{},{},{},{},{},{},{:.0},{},{:.0},{change}\r\n",
                    field(&k.server),
                    k.protocol,
                    k.direction,
                    k.streams,
                    k.block_bytes,
                    k.window_bytes.map_or(String::new(), |w| w.to_string()),
                    k.target_bits_per_second,
                    p.run,
                    utc(p.started_unix_ms),
                    p.started_unix_ms,
                    p.bits_per_second,
                    seg_no + 1,
                    g.median
                )?;
            }
        }
    }
    Ok(())
}

fn write_html(t: &Trend, out: &mut dyn Write) -> std::io::Result<()> {
    let facts = facts(t);
    crate::report::html::write_head(&format!("linerate trend: {}", t.target), &facts, out)?;
    if t.series.is_empty() {
        writeln!(out, "<p>No stored throughput run against this target in this span.</p>")?;
    }
    for s in &t.series {
        writeln!(out, "<h2>{}</h2>", html_escape(&series_name(&s.key)))?;
        if let Some(c) = crate::report::charts::trend(s) {
            crate::report::html::write_charts(std::slice::from_ref(&c), out)?;
        }
        if !s.segments.is_empty() {
            segment_table(s).write_html(out)?;
        }
        crate::report::html::write_list("Changes", &findings(s), "findings", out)?;
    }
    writeln!(out, "</body>\n</html>")
}
