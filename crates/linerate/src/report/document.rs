//! Reports for people: plain text (a terminal) and Markdown (a wiki page or a ticket), from
//! the report model. One function per section serves both styles, and the live `matrix` and
//! `campaign` commands print their tables through the same sections.
//!
//! Must not compute figures: everything comes from `report::model` or `stats`.
//!
//! Text passes through `units::peer_text::escape` on the way out (headings, list items,
//! facts, table cells): findings, warnings and failure reasons quote stored records, which
//! quote peers (docs/SECURITY.md, "Peer strings").

use std::io::Write;

use crate::report::latency;
use crate::report::model::{Report, ReportKind};
use crate::report::table::{RateUnit, Table, cell_table};
use crate::stats::campaign::TierSummary;
use crate::stats::matrix::MatrixSummary;
use crate::units::format_bits_per_second;
use crate::units::peer_text::escape;

/// Plain text or Markdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// Aligned columns, `==` headings, `  - ` bullets.
    Text,
    /// Pipe tables, `#` headings, `- ` bullets.
    Markdown,
}

impl Style {
    /// A heading of `level` (1 = the report's title).
    pub fn heading(self, level: usize, text: &str, out: &mut dyn Write) -> std::io::Result<()> {
        let text = escape(text);
        match self {
            Style::Text if level == 1 => writeln!(out, "{text}"),
            Style::Text => writeln!(out, "== {text} =="),
            Style::Markdown => writeln!(out, "{} {text}\n", "#".repeat(level)),
        }
    }

    /// A titled list ("none" when empty).
    pub fn list(self, title: &str, items: &[String], out: &mut dyn Write) -> std::io::Result<()> {
        match self {
            Style::Text => {
                writeln!(out, "{title}:")?;
                if items.is_empty() {
                    return writeln!(out, "  - none");
                }
                items.iter().try_for_each(|i| writeln!(out, "  - {}", escape(i)))
            }
            Style::Markdown => {
                writeln!(out, "\n**{title}:**\n")?;
                if items.is_empty() {
                    return writeln!(out, "- none");
                }
                items.iter().try_for_each(|i| writeln!(out, "- {}", md_escape(i)))
            }
        }
    }

    /// A table in this style.
    pub fn table(self, t: &Table, out: &mut dyn Write) -> std::io::Result<()> {
        match self {
            Style::Text => t.write_text(out),
            Style::Markdown => t.write_markdown(out),
        }
    }
}

/// Characters Markdown would read as formatting in running text (after [`escape`]).
pub fn md_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in escape(s).chars() {
        if matches!(c, '\\' | '*' | '_' | '`' | '|' | '<' | '>' | '[' | ']') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A matrix's cell table (rates in `unit`, or the table's own), findings and why it stopped
/// early.
pub fn write_matrix(
    style: Style,
    summary: &MatrixSummary,
    unit: Option<RateUnit>,
    stopped: Option<&str>,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    style.table(&cell_table(summary, unit), out)?;
    style.list("Findings", &summary.findings, out)?;
    if let Some(why) = stopped {
        let why = escape(why);
        writeln!(out, "Stopped early: {why}; the table covers the runs that finished.")?;
    }
    Ok(())
}

/// A tier's body: its cell table, or a fleet tier's fleet figures (in Markdown as a block of
/// the same text); then its findings and why it stopped early.
pub fn write_tier(
    style: Style,
    t: &TierSummary,
    unit: RateUnit,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let Some(fleet) = &t.fleet else {
        return write_matrix(style, &t.summary, Some(unit), t.stopped.as_deref(), out);
    };
    let mut text = Vec::new();
    crate::report::campaign_fleet::write_text(fleet, &mut text)?;
    match style {
        Style::Text => out.write_all(&text)?,
        Style::Markdown => {
            writeln!(out, "```text")?;
            out.write_all(&text)?;
            writeln!(out, "```")?;
        }
    }
    style.list("Findings", &t.summary.findings, out)?;
    if let Some(why) = &t.stopped {
        writeln!(out, "Stopped early: {}; the figures cover the runs that finished.", escape(why))?;
    }
    Ok(())
}

/// A tier's heading: `Tier NAME: server, link …` in a campaign, `NAME: server, link …` for a
/// matrix or run (which have no tiers).
pub fn tier_heading(kind: ReportKind, t: &TierSummary) -> String {
    let link = t.link.map_or(String::new(), |l| {
        format!(", link {} MTU {}", format_bits_per_second(l.bits_per_second as f64), l.mtu_bytes)
    });
    let tier = if kind == ReportKind::Campaign { "Tier " } else { "" };
    format!("{tier}{}: {}{link}", t.name, t.server)
}

/// The one rate unit of a report's tables: its tiers' cell tables and the campaign summary
/// (one unit per column, and the same in every table, so tiers read side by side).
pub fn report_unit(tiers: &[TierSummary]) -> RateUnit {
    RateUnit::of(
        tiers.iter().map(|t| &t.summary),
        tiers.iter().filter_map(|t| t.link_goodput_bits_per_second),
    )
}

/// The cross-tier table: each tier's best cell against its link's goodput, in `unit`.
pub fn campaign_table(tiers: &[TierSummary], unit: RateUnit) -> Table {
    let (mean, goodput) =
        (format!(">mean ({})", unit.name), format!(">link goodput ({})", unit.name));
    let mut t = Table::new(&["tier", "server", "best cell", &mean, &goodput, ">share"]);
    let rate = |v: Option<f64>| v.map_or("n/a".into(), |v| unit.one(v));
    for s in tiers {
        t.rows.push(vec![
            s.name.clone(),
            s.server.clone(),
            s.best_cell.clone().unwrap_or_else(|| "n/a".into()),
            rate(s.best_bits_per_second),
            rate(s.link_goodput_bits_per_second),
            s.share_of_link_goodput.map_or("n/a".into(), |x| format!("{:.1}%", x * 100.0)),
        ]);
    }
    t
}

/// What kept a tier from completing, in a sentence; None for a tier whose runs all completed.
fn incomplete_tier(t: &TierSummary) -> Option<String> {
    let interrupted: usize = t.summary.cells.iter().map(|c| c.interrupted).sum();
    let attempts = t.runs + t.failed + interrupted;
    let why = t.stopped.as_deref().map_or(String::new(), |w| format!(": {w}"));
    let (name, failed) = (&t.name, t.failed);
    Some(match (attempts, t.runs, &t.stopped) {
        (0, _, _) => format!("{name}: did not run{why}"),
        (_, 0, _) => format!("{name}: no run completed ({failed} failed){why}"),
        (_, runs, Some(_)) => {
            format!("{name}: stopped early after {runs} completed and {failed} failed run(s){why}")
        }
        _ if failed > 0 => format!("{name}: {failed} of {attempts} run(s) failed"),
        _ => return None,
    })
}

/// Every tier (heading, table, findings), then the cross-tier table and findings.
pub fn write_campaign(
    style: Style,
    tiers: &[TierSummary],
    findings: &[String],
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let unit = report_unit(tiers);
    for t in tiers {
        writeln!(out)?;
        style.heading(2, &tier_heading(ReportKind::Campaign, t), out)?;
        write_tier(style, t, unit, out)?;
    }
    writeln!(out)?;
    style.heading(2, "Campaign summary (best cell per tier, received)", out)?;
    style.table(&campaign_table(tiers, unit), out)?;
    let incomplete: Vec<String> = tiers.iter().filter_map(incomplete_tier).collect();
    if !incomplete.is_empty() {
        style.list("Tiers that did not complete", &incomplete, out)?;
    }
    if !findings.is_empty() {
        style.list("Findings across tiers", findings, out)?;
    }
    Ok(())
}

/// A report's title (`linerate report: TITLE`) and the facts it opens with.
pub fn write_head(
    style: Style,
    title: &str,
    facts: &[(&str, String)],
    out: &mut dyn Write,
) -> std::io::Result<()> {
    style.heading(1, &format!("linerate report: {title}"), out)?;
    write_facts(style, facts, out)
}

/// A report's facts, a line each.
pub fn write_facts(
    style: Style,
    facts: &[(&str, String)],
    out: &mut dyn Write,
) -> std::io::Result<()> {
    for (k, v) in facts {
        match style {
            Style::Text => writeln!(out, "{k}: {}", escape(v))?,
            Style::Markdown => writeln!(out, "- **{k}:** {}", md_escape(v))?,
        }
    }
    Ok(())
}

/// The whole report.
pub fn write_report(style: Style, r: &Report, out: &mut dyn Write) -> std::io::Result<()> {
    write_head(style, &r.title, &r.facts(), out)?;
    match r.kind {
        ReportKind::Campaign => write_campaign(style, &r.tiers, &r.findings, out)?,
        ReportKind::Fleet => {
            if let Some(f) = r.fleet() {
                crate::report::fleet::write_report_body(style, f, out)?;
            }
        }
        ReportKind::Run | ReportKind::Matrix => {
            let unit = report_unit(&r.tiers);
            for (i, t) in r.tiers.iter().enumerate() {
                writeln!(out)?;
                style.heading(2, &tier_heading(r.kind, t), out)?;
                let run = r.single_run(i);
                let latency_only = run.is_some_and(latency::replaces_throughput);
                if !latency_only {
                    write_matrix(style, &t.summary, Some(unit), t.stopped.as_deref(), out)?;
                }
                for s in run.map(latency::sections).unwrap_or_default() {
                    writeln!(out)?;
                    style.heading(3, &s.heading, out)?;
                    style.table(&s.table, out)?;
                    style.list("Notes", &s.notes, out)?;
                }
                if latency_only {
                    style.list("Findings", &t.summary.findings, out)?;
                }
            }
            if let Some(m) = &r.mesh {
                crate::report::mesh::write_places(style, m, out)?;
            }
        }
    }
    if !r.warnings.is_empty() {
        writeln!(out)?;
        style.list("Warnings", &r.warnings, out)?;
    }
    Ok(())
}
