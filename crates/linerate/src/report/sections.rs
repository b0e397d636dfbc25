//! The sections of a report for people, in either style (`style.rs`): a matrix's cell table,
//! a campaign's tiers, the head and its facts. The live `matrix` and `campaign` commands print
//! their tables through the same sections; `document.rs` puts a whole report together.
//!
//! Must not compute figures: everything comes from `report::model` or `stats`.

use std::io::Write;

use crate::report::model::ReportKind;
use crate::report::style::{Style, md_escape};
use crate::report::table::{RateUnit, Table, cell_table};
use crate::stats::campaign::TierSummary;
use crate::stats::matrix::MatrixSummary;
use crate::units::format_bits_per_second;
use crate::units::peer_text::escape;

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
