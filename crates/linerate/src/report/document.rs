//! Reports for people: plain text (a terminal) and Markdown (a wiki page or a ticket), from
//! the report model: the head, then each kind's sections (`sections.rs`, `fleet.rs`,
//! `mesh.rs`, `latency.rs`) in the style asked for (`style.rs`).
//!
//! Must not compute figures: everything comes from `report::model` or `stats`.
//!
//! Text passes through `units::peer_text::escape` on the way out (headings, list items,
//! facts, table cells): findings, warnings and failure reasons quote stored records, which
//! quote peers (docs/SECURITY.md, "Peer strings").

use std::io::Write;

use crate::report::latency;
use crate::report::model::{Report, ReportKind};
use crate::report::sections::{
    report_unit, tier_heading, write_campaign, write_head, write_matrix,
};
use crate::report::style::Style;

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
