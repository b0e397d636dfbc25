//! `linerate report --trend HOST`: one target's stored results over time, in every format.
//! Each test against the target is a series; each series is a table of its stretches between
//! changes and a sentence per change ("run 26, 2026-11-26 22:15:07 UTC: 956 Mbit/s → 574
//! Mbit/s (−40.0 %), p = 0.001: a regression"); HTML adds a chart of every run over time with
//! the stretches' medians and the changes marked. The figures come from `stats::trend`.

use std::io::Write;

use serde::Serialize;

use crate::plan::ReportFormat;
use crate::report::csv::field;
use crate::report::document::Style;
use crate::report::table::{Table, html_escape};
use crate::stats::trend::{Change, Series, SeriesKey, Trend};
use crate::units::utc;
use crate::units::{ByteCount, format_bits_per_second};

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

/// The test a series is, in words: "TCP upload, 4 streams, 128 KiB blocks, default window,
/// unlimited rate, to 10.0.0.2:5201".
pub fn series_name(k: &SeriesKey) -> String {
    let window =
        k.window_bytes.map_or("default window".into(), |w| format!("{} window", ByteCount(w)));
    let rate = match k.target_bits_per_second {
        0 => "unlimited rate".to_string(),
        b => format!("paced at {}", format_bits_per_second(b as f64)),
    };
    let streams = if k.streams == 1 { "1 stream".into() } else { format!("{} streams", k.streams) };
    format!(
        "{} {}, {streams}, {} blocks, {window}, {rate}, to {}",
        k.protocol.to_uppercase(),
        k.direction,
        ByteCount(k.block_bytes),
        k.server
    )
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

/// A change in one sentence.
pub fn change_sentence(c: &Change) -> String {
    let what = if c.regression { "a regression" } else { "an improvement" };
    format!(
        "run {}, {} UTC: {} → {} ({:+.1} %), p = {:.3}: {what}",
        c.run,
        utc(c.started_unix_ms),
        format_bits_per_second(c.before),
        format_bits_per_second(c.after),
        c.relative * 100.0,
        c.p_value
    )
}

/// A drift in one sentence, over the points `(noun, nouns)` (runs, meshes), its slope in
/// `unit`: "drift: −4.1 % a run over 14 runs (Mann–Kendall p = 0.0001, Theil–Sen slope
/// −8.2 Mbit/s a run): a decline …".
pub fn drift_sentence(
    d: &crate::stats::drift::Drift,
    (noun, nouns): (&str, &str),
    unit: fn(f64) -> String,
) -> String {
    let way = if d.slope_per_run < 0.0 { "a decline" } else { "a rise" };
    let slope = unit(d.slope_per_run.abs());
    let sign = if d.slope_per_run < 0.0 { "−" } else { "+" };
    format!(
        "drift: {:+.1} % a {noun} over {} {nouns} (Mann–Kendall p {}, Theil–Sen slope \
         {sign}{slope} a {noun}): {way} that a line fits better than steps",
        d.relative_per_run * 100.0,
        d.runs,
        p_words(d.p_value)
    )
}

/// A fresh drop (or, for a figure worse when higher, a rise) in one sentence, over the points
/// `(noun, nouns)` (runs, meshes), in `unit`: "fresh drop: the last 2 runs after a stable 12:
/// −40.0 % (200 Mbit/s → 120 Mbit/s), below every earlier run (p < 0.0001 for runs like
/// those)".
pub fn fresh_sentence(
    f: &crate::stats::drift::FreshDrop,
    (noun, nouns): (&str, &str),
    unit: fn(f64) -> String,
) -> String {
    let last = if f.runs == 1 {
        format!("the last {noun}")
    } else {
        format!("the last {} {nouns}", f.runs)
    };
    let (what, side) = if f.relative < 0.0 { ("drop", "below") } else { ("rise", "above") };
    format!(
        "fresh {what}: {last} after a stable {}: {:+.1} % ({} → {}), {side} every earlier {noun} \
         (p {} for {nouns} like those)",
        f.before_runs,
        f.relative * 100.0,
        unit(f.before),
        unit(f.after),
        p_words(f.p_value)
    )
}

/// A rate as the reports write it.
pub fn rate_words(bits_per_second: f64) -> String {
    format_bits_per_second(bits_per_second)
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

/// A p-value in words that do not round a small one to zero: "< 0.0001", "= 0.0023".
fn p_words(p: f64) -> String {
    if p < 0.0001 { "< 0.0001".into() } else { format!("= {p:.4}") }
}

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
    crate::report::document::write_facts(style, &facts(t), out)?;
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
