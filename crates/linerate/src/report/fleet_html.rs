//! A stored fleet or scaling curve as one self-contained HTML page, built like every report
//! page (`report::html`: inline CSS and SVG, nothing to fetch).
//!
//! A fleet: the facts, how the hosts started, the totals, then per direction the host table,
//! the spread across hosts and across flows and the outliers, the hosts not measured, and the
//! fairness charts. A curve: the facts, per direction its table and where the total stops
//! rising, the scaling chart, and the partial runs. Must not compute figures; every text is
//! HTML-escaped.

use std::io::Write;

use crate::report::charts::fleet_charts;
use crate::report::fleet::{
    WHOLE_TEST_NOTE, flow_words, host_table, jain_text, not_measured_lines, not_measured_title,
    outlier_sentence, outside_sentence, plateau_sentence, scale_table, start_sentence, total_lines,
};
use crate::report::fleet_report::FleetReport;
use crate::report::html::{write_charts, write_head, write_list};
use crate::report::table::{Table, html_escape};
use crate::stats::fleet::{FleetDirection, FleetSummary, OUTLIER_SHARE, Spread};
use crate::units::{format_bits_per_second, three_figures};

/// The spread of the hosts' rates and of every flow's: n, mean, σ, CV, min–max, Jain.
pub fn spread_table(d: &FleetDirection) -> Table {
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
fn write_fleet(s: &FleetSummary, out: &mut dyn Write) -> std::io::Result<()> {
    paragraph(&start_sentence(s), out)?;
    writeln!(out, "<h2>Totals</h2>")?;
    writeln!(out, "<ul class=\"findings\">")?;
    for line in total_lines(s) {
        writeln!(out, "<li>{}</li>", html_escape(&line))?;
    }
    writeln!(out, "</ul>")?;
    for d in &s.directions {
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

/// The whole page.
pub fn write(r: &FleetReport, out: &mut dyn Write) -> std::io::Result<()> {
    write_head(&format!("linerate report: {}", r.title()), &r.facts(), out)?;
    match (&r.curve, r.runs.first()) {
        (Some(curve), _) => {
            for d in &curve.directions {
                writeln!(out, "<h2>Scaling, data {}</h2>", html_escape(flow_words(d.flow)))?;
                scale_table(d).write_html(out)?;
                paragraph(&plateau_sentence(d), out)?;
            }
            if curve.directions.is_empty() {
                paragraph("Scaling: n/a (no fleet run completed)", out)?;
            }
        }
        (None, Some(run)) => write_fleet(&run.summary, out)?,
        (None, None) => paragraph("No host runs are stored in this fleet.", out)?,
    }
    write_charts(&fleet_charts(r), out)?;
    let warnings = r.warnings();
    if !warnings.is_empty() {
        write_list("Warnings", &warnings, "warn", out)?;
    }
    writeln!(out, "</body>\n</html>")
}
