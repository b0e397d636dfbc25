//! One self-contained HTML file: inline CSS, inline SVG charts (`report::charts`), no
//! scripts, fonts, images or links to fetch — it opens the same offline, from a mail
//! attachment or an archive years later. Exact values show on hover through SVG `<title>`s.
//!
//! Sections: the facts (date, hosts, settings), per tier the cell table (`report::table`) and
//! findings (a fleet tier: its fleet runs' tables or its scaling curve), the cross-tier table
//! of a campaign, the charts, then warnings. Must not compute
//! figures; every text is HTML-escaped.

use std::io::Write;

use crate::report::charts::{Chart, report_charts};
use crate::report::fleet::{
    WHOLE_TEST_NOTE, contended_sentence, flow_words, host_table, jain_text, latency_table,
    latency_total, not_measured_lines, not_measured_title, outlier_sentence, outside_sentence,
    plateau_sentence, scale_table, start_sentence, total_lines,
};
use crate::report::latency;
use crate::report::model::{Report, ReportKind};
use crate::report::sections::{campaign_table, report_unit, tier_heading};
use crate::report::table::{Table, cell_table};
use crate::report::words::html_escape;
use crate::stats::campaign_fleet::{FleetRun, FleetTierFigures};
use crate::stats::fleet::{FleetDirection, FleetSummary, OUTLIER_SHARE, Spread};
use crate::units::{count_of, format_bits_per_second, three_figures};

/// The page's style: charts span the page (their text scales with it: ≥ 12 px from 1000 px
/// wide), and print on landscape pages, one chart never split across two.
const STYLE: &str = "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2em;\
color:#111;max-width:1800px}h1{font-size:1.6em}h2{font-size:1.25em;margin-top:1.6em;\
border-bottom:1px solid #ccc}table{border-collapse:collapse;margin:.6em 0;font-size:.9em}\
th,td{border:1px solid #bbb;padding:.25em .6em;text-align:left}td.num{text-align:right;\
font-variant-numeric:tabular-nums}th{background:#f0f0f0}dl{display:grid;\
grid-template-columns:max-content auto;gap:.2em 1em}dt{font-weight:600}dd{margin:0}\
figure.chart{margin:1.6em 0 2.4em;break-inside:avoid}figure.chart svg{display:block;width:100%;\
height:auto}figcaption{font-size:1em;color:#333;margin-top:.5em;max-width:70em}\
.warn li{color:#8a4b00}@page{size:A4 landscape;margin:12mm}\
@media print{body{margin:0;max-width:none}}";

/// The page head and the facts.
pub fn write_head(
    title: &str,
    facts: &[(&str, String)],
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let title = html_escape(title);
    writeln!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{title}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{title}</h1>\n<dl>"
    )?;
    for (k, v) in facts {
        writeln!(out, "<dt>{}</dt><dd>{}</dd>", html_escape(k), html_escape(v))?;
    }
    writeln!(out, "</dl>")
}

/// A titled list, `class` on the `<ul>`.
pub fn write_list(
    title: &str,
    items: &[String],
    class: &str,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    writeln!(out, "<h3>{}</h3>\n<ul class=\"{class}\">", html_escape(title))?;
    if items.is_empty() {
        writeln!(out, "<li>none</li>")?;
    }
    for i in items {
        writeln!(out, "<li>{}</li>", html_escape(i))?;
    }
    writeln!(out, "</ul>")
}

/// Charts as figures, each with its one-sentence caption; a page without data to plot says so.
pub fn write_charts(charts: &[Chart], out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(out, "<h2>Charts</h2>")?;
    if charts.is_empty() {
        writeln!(out, "<p>No charts: no run measured anything to plot.</p>")?;
    }
    for c in charts {
        writeln!(
            out,
            "<figure class=\"chart\" data-kind=\"{}\">\n{}\n<figcaption>{}</figcaption>\n</figure>",
            c.kind,
            c.svg,
            html_escape(&c.caption)
        )?;
    }
    Ok(())
}

/// The whole report as one HTML file.
pub fn write(r: &Report, out: &mut dyn Write) -> std::io::Result<()> {
    write_head(&format!("linerate report: {}", r.title), &r.facts(), out)?;
    if let Some(f) = r.fleet() {
        write_fleet_tier(f, out)?;
    }
    let unit = report_unit(&r.tiers);
    for (i, t) in r.tiers.iter().enumerate().filter(|_| r.kind != ReportKind::Fleet) {
        writeln!(out, "<h2>{}</h2>", html_escape(&tier_heading(r.kind, t)))?;
        let run = r.single_run(i);
        match &t.fleet {
            Some(fleet) => write_fleet_tier(fleet, out)?,
            None if run.is_some_and(latency::replaces_throughput) => {}
            None => cell_table(&t.summary, Some(unit)).write_html(out)?,
        }
        for s in run.map(latency::sections).unwrap_or_default() {
            writeln!(out, "<h3>{}</h3>", html_escape(&s.heading))?;
            s.table.write_html(out)?;
            write_list("Notes", &s.notes, "notes", out)?;
        }
        write_list("Findings", &t.summary.findings, "findings", out)?;
        if let Some(why) = &t.stopped {
            writeln!(
                out,
                "<p>Stopped early: {}; the table covers the runs that finished.</p>",
                html_escape(why)
            )?;
        }
    }
    if let Some(m) = &r.mesh {
        writeln!(out, "<h2>Agents and zones</h2>")?;
        crate::report::mesh::agents_table(m).write_html(out)?;
        for t in crate::report::mesh::group_tables(m) {
            t.write_html(out)?;
        }
        write_list("Mesh findings", &m.findings, "findings", out)?;
    }
    if r.kind == ReportKind::Campaign {
        writeln!(out, "<h2>Campaign summary (best cell per tier, received)</h2>")?;
        campaign_table(&r.tiers, unit).write_html(out)?;
        write_list("Findings across tiers", &r.findings, "findings", out)?;
    }
    write_charts(&report_charts(r), out)?;
    if !r.warnings.is_empty() {
        write_list("Warnings", &r.warnings, "warn", out)?;
    }
    writeln!(out, "</body>\n</html>")
}

/// A fleet's figures (a fleet report's, a campaign's fleet tier's): a curve's table per
/// direction and where its total stops rising; else each fleet run that counts with its
/// start, totals, per direction the host table, the spread across hosts and flows and the
/// outliers, and the hosts not measured.
fn write_fleet_tier(f: &FleetTierFigures, out: &mut dyn Write) -> std::io::Result<()> {
    if !f.scale.is_empty() {
        for d in &f.curve.directions {
            writeln!(out, "<h2>Scaling, data {}</h2>", html_escape(flow_words(d.flow)))?;
            scale_table(d).write_html(out)?;
            if let Some(note) = contended_sentence(d) {
                paragraph(&note, out)?;
            }
            paragraph(&plateau_sentence(d), out)?;
        }
        if f.curve.directions.is_empty() {
            paragraph("Scaling: n/a (no fleet run completed)", out)?;
        }
        return Ok(());
    }
    let counted: Vec<&FleetRun> = f.counted().collect();
    if counted.is_empty() {
        paragraph("No host runs are stored in this fleet.", out)?;
    }
    for run in &counted {
        if counted.len() > 1 {
            let hosts = count_of(run.hosts as u64, "host");
            writeln!(out, "<h2>Fleet run {} ({hosts})</h2>", run.repetition)?;
        }
        write_fleet_run(&run.summary, out)?;
    }
    Ok(())
}

/// The spread of the hosts' rates and of every flow's: n, mean, σ, CV, min–max, Jain.
fn spread_table(d: &FleetDirection) -> Table {
    let mut t = Table::new(&["across", ">n", ">mean", ">σ", ">CV", ">min–max", ">Jain"]);
    let row = |what: &str, s: Option<&Spread>, none: &str| -> Vec<String> {
        let Some(s) = s else {
            let mut r = vec![what.to_string(), "0".into(), format!("n/a ({none})")];
            r.resize(7, "n/a".into());
            return r;
        };
        let one =
            |v: Option<f64>, f: &dyn Fn(f64) -> String| v.map_or(format!("n/a (n={})", s.n), f);
        vec![
            what.to_string(),
            s.n.to_string(),
            format_bits_per_second(s.mean),
            one(s.stddev, &format_bits_per_second),
            one(s.cv, &|cv| format!("{}%", three_figures(cv * 100.0))),
            format!("{}–{}", format_bits_per_second(s.min), format_bits_per_second(s.max)),
            jain_text(s),
        ]
    };
    t.rows.push(row("hosts", d.across_hosts.as_ref(), "no host measured"));
    t.rows.push(row("flows", d.across_flows.as_ref(), "no flow reported"));
    t
}

fn paragraph(text: &str, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(out, "<p>{}</p>", html_escape(text))
}

/// One fleet run's sections.
fn write_fleet_run(s: &FleetSummary, out: &mut dyn Write) -> std::io::Result<()> {
    paragraph(&start_sentence(s), out)?;
    writeln!(out, "<h2>Totals</h2>")?;
    writeln!(out, "<ul class=\"findings\">")?;
    for line in total_lines(s) {
        writeln!(out, "<li>{}</li>", html_escape(&line))?;
    }
    writeln!(out, "</ul>")?;
    if let Some(l) = &s.latency {
        writeln!(out, "<h2>Transactions (request/response)</h2>")?;
        latency_table(l).write_html(out)?;
        paragraph(&latency_total(l), out)?;
    }
    for d in s.throughput_directions() {
        writeln!(out, "<h2>Data {}</h2>", html_escape(flow_words(d.flow)))?;
        host_table(d).write_html(out)?;
        if d.hosts.iter().any(|h| h.whole_test) {
            paragraph(WHOLE_TEST_NOTE, out)?;
        }
        writeln!(out, "<h3>Spread across hosts and flows</h3>")?;
        spread_table(d).write_html(out)?;
        if let Some(line) = outside_sentence(s, d) {
            paragraph(&line, out)?;
        }
        let outliers: Vec<String> = d.outliers.iter().map(outlier_sentence).collect();
        let title =
            format!("Outliers (more than {:.0}% from the median host)", OUTLIER_SHARE * 100.0);
        write_list(&title, &outliers, "findings", out)?;
    }
    if !s.not_measured.is_empty() {
        write_list(&not_measured_title(s), &not_measured_lines(s), "warn", out)?;
    }
    Ok(())
}

/// `linerate compare A B --html FILE`: both reports' facts, the comparison table, and both
/// sets of cells on the same axes.
pub fn write_compare(
    a: &Report,
    b: &Report,
    rows: &[crate::report::history::CompareRow],
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let mut facts = Vec::new();
    for (side, r) in [("A", a), ("B", b)] {
        facts.push((side, r.title.clone()));
        for (k, v) in r.facts() {
            facts.push((k, v));
        }
    }
    write_head(&format!("linerate compare: {} vs {}", a.title, b.title), &facts, out)?;
    writeln!(out, "<h2>Cell by cell (A = before, B = after)</h2>")?;
    for t in crate::report::history::compare_tables(rows) {
        t.write_html(out)?;
    }
    let changes = crate::report::history::environment_lines(rows);
    if let Some((heading, lines)) = changes.split_first() {
        writeln!(out, "<h3>{}</h3>\n<ul>", crate::report::words::html_escape(heading))?;
        for l in lines {
            writeln!(out, "<li>{}</li>", crate::report::words::html_escape(l.trim()))?;
        }
        writeln!(out, "</ul>")?;
    }
    write_charts(&crate::report::charts::compare_charts(a, b), out)?;
    writeln!(out, "</body>\n</html>")
}
